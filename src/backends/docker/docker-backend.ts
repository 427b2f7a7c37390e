/**
 * The single-machine backend: every run gets a fresh, hardened container that is never reused
 * (DESIGN.md §6), and every session one that lives as long as it does (session/). Containers are
 * removed on every path; leftovers of a crashed caller are reaped at start-up and periodically, and
 * what an engine that went away (stopped, restarted) left once it is back.
 */
import Docker from 'dockerode';
import { classify } from '../../api/outcome.js';
import { buildResult } from '../../api/result.js';
import type { RunResult } from '../../api/run.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { SocketGates } from '../../egress/socket-gates.js';
import { createTenant } from '../../egress/tenant.js';
import { BUILTIN_TEMPLATES } from '../../policy/templates.js';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { openGate } from '../egress-gates.js';
import { SandboxRemovals } from '../sandbox-removals.js';
import { runFileStore, type RunFilesOptions, type RunFileStore } from '../run-file-store.js';
import { Executions, type ExecutionContext } from '../executions.js';
import { runOutputsOf } from '../../runner/run-outputs.js';
import type { LostSession } from '../sessions.js';
import type { BackendHealth, RunExecution, RunFiles, SandboxBackend, StartOptions } from '../types.js';
import { AttachedRunner } from './attached-runner.js';
import { buildContainerConfig } from './container-config.js';
import { ENGINE_HINT, engineError } from './engine-errors.js';
import { currentOwner } from './owner.js';
import { PoolManager } from './pool/pool-manager.js';
import type { PoolOptions } from './pool/pool-options.js';
import { EngineWatch } from './engine-watch.js';
import { reapAfterEngineLoss, reapLeftovers, type ReapOptions } from './reaper.js';
import { LABELS, MANAGED_FILTER } from './labels.js';
import { DockerSessions } from './session/docker-sessions.js';

export interface DockerBackendOptions {
  socketPath?: string;
  docker?: Docker;
  /** Images `health()` reports on; defaults to the built-in templates' images. */
  images?: readonly string[];
  /** Warm pools; absent or disabled means every run starts its container cold. */
  pool?: PoolOptions;
  metrics?: Metrics;
  logger?: Logger;
  /**
   * The gateway instance its sessions belong to (`server.instanceId`): a gateway started again
   * with the same id adopts them. Without one, sessions end when the backend closes (a stdio
   * gateway's), or with their owner's death.
   */
  instanceId?: string | undefined;
  /** Told of every session container the reaper removed (its runner had ended), to be audited. */
  onSessionLost?: ((lost: LostSession) => void) | undefined;
  /** Where runs' output files are kept, and how many bytes of them at most. */
  runFiles?: RunFilesOptions | undefined;
  /**
   * The egress proxy's per-sandbox sockets: a sandbox with an allowlist gets one, mounted, as its
   * only way out. Absent: an allowlist run fails (policy refuses them anyway while egress is off).
   */
  gates?: SocketGates | undefined;
}

/** Extra life a container's expiry label gets beyond its deadline, for slow starts and removal. */
const EXPIRY_SLACK_MS = 5 * 60_000;

export class DockerBackend implements SandboxBackend {
  readonly name = 'docker';
  readonly docker: Docker;
  readonly owner = currentOwner();
  private readonly images: readonly string[];
  private readonly metrics: Metrics | undefined;
  private readonly logger: Logger | undefined;
  /** The warm pools, when enabled. */
  readonly pool: PoolManager | undefined;
  private readonly removals = new SandboxRemovals();
  private reaping: NodeJS.Timeout | undefined;
  private engineWatch: EngineWatch | undefined;
  private readonly executions = new Executions({ backend: this.name, untilCleanedUp: true });
  /** Long-lived sessions, one container each. */
  readonly sessions: DockerSessions;
  private readonly instanceId: string | undefined;
  private readonly onSessionLost: ((lost: LostSession) => void) | undefined;
  private readonly fileStore: RunFileStore;
  /** The files runs returned, kept on disk by this process. */
  readonly files: RunFiles;
  private readonly gates: SocketGates | undefined;

  constructor(options: DockerBackendOptions = {}) {
    this.docker = options.docker ?? new Docker({ socketPath: options.socketPath ?? '/var/run/docker.sock' });
    this.images = options.images ?? BUILTIN_TEMPLATES.map((t) => t.image);
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.instanceId = options.instanceId;
    this.onSessionLost = options.onSessionLost;
    this.gates = options.gates;
    this.pool = options.pool?.enabled
      ? new PoolManager({
          docker: this.docker,
          owner: this.owner,
          instance: options.instanceId,
          options: options.pool,
          gates: options.gates,
          metrics: options.metrics,
          logger: options.logger,
        })
      : undefined;
    this.fileStore = runFileStore(options.runFiles, this.owner, this.logger);
    this.files = this.fileStore.runFiles;
    this.sessions = new DockerSessions({
      docker: this.docker,
      owner: this.owner,
      instanceId: options.instanceId,
      pool: this.pool,
      gates: options.gates,
      logger: options.logger,
    });
  }

  /**
   * Removes what crashed callers left behind (their owner is gone or their expiry passed). Call
   * once at start-up, before adopting this instance's sessions (which the reaper leaves to
   * adoption). Returns the containers' names.
   */
  async reap(): Promise<string[]> {
    return this.reapWith({});
  }

  private async reapWith(options: Pick<ReapOptions, 'includeOwn'>): Promise<string[]> {
    try {
      const { removed, sessions } = await reapLeftovers(this.docker, {
        ...options,
        instanceId: this.instanceId,
        live: this.sessions.liveContainers(),
      });
      for (const lost of sessions) this.onSessionLost?.(lost);
      await this.sweepGates();
      return removed;
    } catch (e) {
      throw engineError(e, {});
    }
  }

  /** Removes the egress gate directories of sandboxes that are gone (their gateway crashed). */
  private async sweepGates(): Promise<void> {
    if (!this.gates) return;
    const mounted = await this.docker.listContainers({
      all: true,
      filters: { label: [MANAGED_FILTER, LABELS.egressDir] },
    });
    const stale = await this.gates.sweep(new Set(mounted.map((c) => c.Labels[LABELS.egressDir]!)));
    if (stale.length)
      this.logger?.info({ dirs: stale }, 'Removed the egress sockets of sandboxes that are gone');
  }

  /**
   * Reaps every `intervalMs` from now on, until close(), this instance's stopped sessions
   * included (its running ones are never touched); a failed pass is retried at the next. And
   * whenever the engine comes back after it was away, removes what its absence left of this
   * process's (its containers died with it; removing them failed meanwhile).
   */
  startReaping(intervalMs: number): void {
    if (this.reaping) return;
    this.engineWatch = new EngineWatch({
      docker: this.docker,
      logger: this.logger,
      onBack: (lostAt) => void this.reapAfterEngineLoss(lostAt),
    });
    this.engineWatch.start();
    this.reaping = setInterval(() => {
      this.reapWith({ includeOwn: true }).then(
        (removed) => {
          if (removed.length)
            this.logger?.info({ containers: removed }, 'removed containers of crashed sandpit processes');
        },
        (e: unknown) => this.logger?.debug({ err: String(e) }, 'a reaper pass failed'),
      );
    }, intervalMs);
    this.reaping.unref();
  }

  private async reapAfterEngineLoss(lostAt: number): Promise<void> {
    try {
      const removed = await reapAfterEngineLoss(this.docker, { owner: this.owner, lostAt });
      if (removed.length)
        this.logger?.info({ containers: removed }, 'Removed the containers the engine took down with it');
    } catch (e) {
      // Left for the reaper: at their expiry, or once this process is gone.
      this.logger?.warn({ err: String(e) }, 'Could not clear what the engine left after it came back');
    }
  }

  start(spec: EffectiveSpec, options: StartOptions): RunExecution {
    return this.executions.start(spec, options, (ctx) => this.execute(spec, options, ctx));
  }

  private async execute(
    spec: EffectiveSpec,
    { runId, signal, owner, principal }: StartOptions,
    { output, cleanedUp, startedAt }: ExecutionContext,
  ): Promise<RunResult> {
    const acquiring = performance.now();
    let runner = this.claimWarm(spec, runId);
    const served = runner ? 'warm' : 'cold';
    try {
      runner ??= await this.startCold(spec, runId, startedAt);
    } catch (e) {
      cleanedUp();
      throw e;
    }
    // The run's allowlist goes to the sandbox's gate: from now on its connections are this run's.
    if (spec.network.egress === 'allowlist')
      runner.gate?.bind(createTenant({ runId }, principal ?? 'local', spec.network));
    this.metrics?.sandboxAcquire.observe({ served }, (performance.now() - acquiring) / 1000);
    try {
      if (signal?.aborted) return this.executions.cancelled(spec, runId, startedAt);
      const { outcome, facts } = await runner.run(spec, (c) => output.push(c), signal);
      if (outcome.skippedBytes > 0) {
        this.logger?.warn(
          { runId, skippedBytes: outcome.skippedBytes },
          "skipped bytes on the runner's channel that were not its frames (the program wrote into it)",
        );
      }
      const finishedAt = Date.now();
      const kept = this.fileStore.keep(runId, owner ?? '', outcome.outputs);
      return buildResult({
        runId,
        subject: spec,
        outcome: classify(facts),
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        startedAt,
        finishedAt,
        backend: this.name,
        served,
        outputs: runOutputsOf(spec.outputs, kept),
      });
    } finally {
      this.removals.schedule(() => runner.remove(), cleanedUp, signal);
      if (served === 'warm') this.pool?.replenish();
    }
  }

  /** A container started for this run alone (with its egress gate, when it has an allowlist). */
  private async startCold(spec: EffectiveSpec, runId: string, startedAt: number): Promise<AttachedRunner> {
    const gate = await openGate(this.gates, spec, 'sandbox');
    const config = buildContainerConfig(spec, {
      name: `sandpit-run-${runId}`,
      runId,
      kind: 'run',
      owner: this.owner,
      expiresAt: startedAt + spec.limits.timeoutSeconds * 1000 + EXPIRY_SLACK_MS,
      egressDir: gate?.dir,
    });
    return AttachedRunner.start(this.docker, config, gate);
  }

  /** A live, ready pool container for this spec, renamed after the run it now serves. */
  private claimWarm(spec: EffectiveSpec, runId: string): AttachedRunner | undefined {
    for (;;) {
      const runner = this.pool?.claim(spec);
      if (!runner) return undefined;
      if (runner.alive) {
        runner.container.rename({ name: `sandpit-run-${runId}` }).catch(() => {});
        return runner;
      }
      void runner.remove();
    }
  }

  async health(): Promise<BackendHealth> {
    try {
      await this.docker.ping();
    } catch (e) {
      const err = engineError(e, {});
      return { ok: false, backend: this.name, detail: `${err.message}; ${err.hint ?? ENGINE_HINT}` };
    }
    const info = (await this.docker.info()) as { Runtimes?: Record<string, unknown>; ServerVersion?: string };
    const present: string[] = [];
    const missing: string[] = [];
    await Promise.all(
      this.images.map(async (image) => {
        try {
          await this.docker.getImage(image).inspect();
          present.push(image);
        } catch {
          missing.push(image);
        }
      }),
    );
    return {
      ok: missing.length === 0,
      backend: this.name,
      detail: missing.length
        ? `engine ${info.ServerVersion ?? '?'} is up, but images are missing: ${missing.join(', ')} (run \`sandpit images build\`)`
        : `engine ${info.ServerVersion ?? '?'} is up with every sandbox image`,
      images: { present: present.sort(), missing: missing.sort() },
      runtimes: Object.keys(info.Runtimes ?? {}).sort(),
      ...(this.pool ? { pools: this.pool.stats() } : {}),
    };
  }

  /**
   * Stops taking runs and waits for those under way. Sessions of an instance are let go, still
   * running, for the next gateway of that instance; without an instance they end now.
   */
  async close(): Promise<void> {
    clearInterval(this.reaping);
    this.engineWatch?.stop();
    this.executions.close();
    this.removals.close();
    if (this.instanceId) this.sessions.detachAll();
    else await this.sessions.closeAll();
    await this.pool?.close();
    await this.executions.settled();
    await this.removals.settled();
    await this.fileStore.close();
    await this.gates?.close();
  }
}
