/**
 * The OCI backend: every run a brand-new container, made by the OCI runtime itself (runc, or
 * gVisor's runsc) from a bundle, with no engine on the critical path. The container is the one the
 * Docker backend makes (runtime-spec.ts renders the same decision), its root the image unpacked
 * once and mounted read-only (rootfs-store.ts), and its main process the same sandpit-runner,
 * driven by the same job code (../runner-job.ts). The local Docker engine is asked only which
 * image a tag names, every few seconds, and to export an image not unpacked yet. An egress
 * sandbox's way out is the proxy's socket of its own (../../egress/socket-gates.ts), mounted into
 * it as on Docker.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { arch, release } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { classify, type RunFacts } from '../../api/outcome.js';
import { buildResult } from '../../api/result.js';
import type { RunResult } from '../../api/run.js';
import type { SocketGates } from '../../egress/socket-gates.js';
import { createTenant } from '../../egress/tenant.js';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import { EGRESS_SOCKET_PATH } from '../../runner/protocol.js';
import { RunnerReader } from '../../runner/reader.js';
import { runOutputsOf } from '../../runner/run-outputs.js';
import { AppError } from '../../shared/errors.js';
import { within } from '../../shared/time.js';
import { currentOwner } from '../docker/owner.js';
import { LABELS, MANAGED_BY } from '../docker/labels.js';
import { openGate } from '../egress-gates.js';
import { Executions, type ExecutionContext } from '../executions.js';
import { resolvConf, SANDBOX_HOSTNAME } from '../hardening.js';
import { SandboxRemovals } from '../sandbox-removals.js';
import { runFileStore, type RunFilesOptions, type RunFileStore } from '../run-file-store.js';
import { runJob, type RunnerSandbox } from '../runner-job.js';
import type { BackendHealth, RunExecution, RunFiles, SandboxBackend, StartOptions } from '../types.js';
import { checkHost, type HostCheck } from './host-check.js';
import { cgroupsPath, containerId, etcFiles, type OciLayout, type OciRuntime } from './layout.js';
import { OciContainer, type OciHost } from './oci-container.js';
import { OciSessions, type BundleMaker } from './oci-sessions.js';
import { reapOci, type OciReapResult } from './reaper.js';
import { RootfsStore, type ImageRootfs } from './rootfs-store.js';
import { DEFAULT_BINARIES, type RuntimeBinaries } from './runtime-command.js';
import { buildRuntimeSpec } from './runtime-spec.js';
import { goArch, type SeccompHost } from './seccomp.js';

export interface OciBackendOptions {
  docker: Docker;
  layout: OciLayout;
  binaries?: RuntimeBinaries;
  /** Images `health()` reports on. */
  images: readonly string[];
  /** How often a tag is checked for a new image (ms). */
  imageRefreshMs?: number;
  /** Where runs' output files are kept, and how many bytes of them at most. */
  runFiles?: RunFilesOptions | undefined;
  metrics?: Metrics | undefined;
  logger?: Logger | undefined;
  /**
   * The egress proxy's per-sandbox sockets: a sandbox with an allowlist gets one, mounted, as its
   * only way out. Absent: an allowlist run or session is refused (policy refuses them anyway while
   * egress is off).
   */
  gates?: SocketGates | undefined;
}

/** Extra life a container's expiry annotation gets beyond its deadline, for slow starts and removal. */
const EXPIRY_SLACK_MS = 5 * 60_000;
/** How long a run whose runner never reported waits for the runtime's own end. */
const END_WAIT_MS = 10_000;

export class OciBackend implements SandboxBackend {
  readonly name = 'oci';
  readonly owner = currentOwner();
  private readonly host: OciHost;
  private readonly rootfs: RootfsStore;
  private readonly images: readonly string[];
  private readonly metrics: Metrics | undefined;
  private readonly logger: Logger | undefined;
  private readonly seccompHost: SeccompHost = { arch: goArch(arch()), kernel: release() };
  private readonly executions = new Executions({ backend: this.name, untilCleanedUp: true });
  private readonly removals = new SandboxRemovals();
  private readonly live = new Set<string>();
  /** Long-lived sessions, one container each; they end with this process. */
  readonly sessions: OciSessions;
  private readonly fileStore: RunFileStore;
  /** The files runs returned, kept on disk by this process. */
  readonly files: RunFiles;
  private prepared: Promise<void> | undefined;
  private reaping: NodeJS.Timeout | undefined;
  private readonly gates: SocketGates | undefined;

  constructor(options: OciBackendOptions) {
    this.host = { layout: options.layout, binaries: options.binaries ?? DEFAULT_BINARIES };
    this.rootfs = new RootfsStore({
      docker: options.docker,
      dir: options.layout.rootfsDir,
      refreshMs: options.imageRefreshMs,
      owner: this.owner,
      logger: options.logger,
    });
    this.sessions = new OciSessions({ host: this.host, owner: this.owner, bundle: this.bundle });
    this.gates = options.gates;
    this.images = options.images;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.fileStore = runFileStore(options.runFiles, this.owner, this.logger);
    this.files = this.fileStore.runFiles;
  }

  /** The shared read-only /etc files, written once. */
  private prepare(): Promise<void> {
    this.prepared ??= (async () => {
      const etc = etcFiles(this.host.layout);
      await mkdir(join(this.host.layout.runDir, 'etc'), { recursive: true, mode: 0o755 });
      await writeFile(etc.resolvConf, resolvConf(), { mode: 0o644 });
      await writeFile(etc.hostname, `${SANDBOX_HOSTNAME}\n`, { mode: 0o644 });
      await writeFile(etc.hosts, `127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t${SANDBOX_HOSTNAME}\n`, {
        mode: 0o644,
      });
    })();
    this.prepared.catch(() => (this.prepared = undefined));
    return this.prepared;
  }

  /**
   * Removes what dead sandpit processes left behind (containers, bundles, cgroups, unused roots,
   * the egress sockets of sandboxes that are gone).
   */
  async reap(): Promise<OciReapResult> {
    const live = new Set([...this.live, ...this.sessions.liveContainers()]);
    const result = await reapOci(this.host, { live });
    const roots = await this.rootfs.prune(result.rootsInUse).catch(() => []);
    if (roots.length) this.logger?.info({ images: roots }, 'Removed unpacked images no tag names any more');
    // What no kept bundle mounts and nobody listens in: the gates of sandboxes a dead process left.
    const stale = (await this.gates?.sweep(result.egressDirsInUse).catch(() => [])) ?? [];
    if (stale.length)
      this.logger?.info({ dirs: stale }, 'Removed the egress sockets of sandboxes that are gone');
    return result;
  }

  /** Reaps every `intervalMs` from now on, until close(). */
  startReaping(intervalMs: number): void {
    if (this.reaping) return;
    this.reaping = setInterval(() => {
      this.reap().then(
        (r) => {
          if (r.removed.length)
            this.logger?.info({ containers: r.removed }, 'Removed containers of crashed sandpit processes');
        },
        (e: unknown) => this.logger?.debug({ err: String(e) }, 'a reaper pass failed'),
      );
    }, intervalMs);
    this.reaping.unref();
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
    let container: OciContainer;
    const reader = new RunnerReader();
    try {
      container = await this.create(spec, { runId, principal }, startedAt, (b) => reader.push(b));
    } catch (e) {
      cleanedUp();
      throw e;
    }
    this.live.add(container.id);
    this.metrics?.sandboxAcquire.observe({ served: 'cold' }, (performance.now() - acquiring) / 1000);
    try {
      if (signal?.aborted) return this.executions.cancelled(spec, runId, startedAt);
      const { outcome, facts } = await runJob(
        this.sandbox(container, reader, spec.image),
        spec,
        (c) => output.push(c),
        signal,
      );
      if (outcome.skippedBytes > 0) {
        this.logger?.warn(
          { runId, skippedBytes: outcome.skippedBytes },
          "skipped bytes on the runner's channel that were not its frames (the program wrote into it)",
        );
      }
      return buildResult({
        runId,
        subject: spec,
        outcome: classify(facts),
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        startedAt,
        finishedAt: Date.now(),
        backend: this.name,
        served: 'cold',
        outputs: runOutputsOf(spec.outputs, this.fileStore.keep(runId, owner ?? '', outcome.outputs)),
      });
    } finally {
      const id = container.id;
      this.removals.schedule(() => container.remove().finally(() => this.live.delete(id)), cleanedUp, signal);
    }
  }

  /** The bundle and the runtime process of a new run's container (its gate bound to the run). */
  private async create(
    spec: EffectiveSpec,
    { runId, principal }: Pick<StartOptions, 'runId' | 'principal'>,
    startedAt: number,
    sink: (b: Buffer) => void,
  ): Promise<OciContainer> {
    const sandbox = await this.bundle(spec, {
      id: containerId(runId),
      annotations: {
        [LABELS.managedBy]: MANAGED_BY,
        [LABELS.kind]: 'run',
        [LABELS.owner]: this.owner,
        [LABELS.run]: runId,
        [LABELS.expires]: String(startedAt + spec.limits.timeoutSeconds * 1000 + EXPIRY_SLACK_MS),
        ...(spec.template ? { [LABELS.template]: spec.template } : {}),
      },
    });
    // The run's allowlist goes to its sandbox's gate: its connections are this run's.
    sandbox.gate?.bind(createTenant({ runId }, principal ?? 'local', spec.network));
    return OciContainer.start(this.host, sandbox, sink);
  }

  /**
   * The runtime, container id and config.json of a sandbox of `shape` (its image unpacked when need
   * be), and its egress gate when it has an allowlist: the caller binds it, and it closes with the
   * container.
   */
  private readonly bundle: BundleMaker = async (shape, { id, annotations, openWithinSeconds }) => {
    const runtime = runtimeOf(shape.runtime);
    await this.prepare();
    const root = await this.rootfs.get(shape.image);
    const session = openWithinSeconds !== undefined;
    const gate = await openGate(this.gates, shape, session ? 'session' : 'sandbox');
    try {
      const spec = buildRuntimeSpec(shape, {
        rootfs: root.path,
        imageEnv: root.env,
        etc: etcFiles(this.host.layout),
        cgroupsPath: cgroupsPath(id),
        annotations,
        host: this.seccompHost,
        egressDir: gate?.dir,
        ...(session ? { mode: 'session' as const, openWithinSeconds } : {}),
      });
      return { runtime, id, spec, gate };
    } catch (e) {
      await gate?.close();
      throw e;
    }
  };

  /** The container as the shared job code drives it. */
  private sandbox(container: OciContainer, reader: RunnerReader, image: string): RunnerSandbox {
    return {
      reader,
      image,
      ended: container.exited.then(() => undefined),
      egressSocket: container.gate?.tenant ? EGRESS_SOCKET_PATH : undefined,
      write: (parts) => container.write(parts),
      kill: () => container.kill(),
      endWithoutReport: (deadline) => this.endOf(container, deadline),
    };
  }

  /** The runner never reported: the runtime's exit status, and OOM from the run's cgroup. */
  private async endOf(container: OciContainer, deadline: boolean): Promise<RunFacts> {
    const exit = await within(container.exited, END_WAIT_MS);
    const oomKilled = await container.oomKilled();
    return {
      exitCode: exit?.code ?? null,
      timedOut: deadline,
      oomKilled,
      cancelled: false,
      ...(deadline || oomKilled
        ? {}
        : { failure: container.diagnosis('the sandbox ended without reporting a result') }),
    };
  }

  /** The unpacked, read-only root of `image` that runs get (unpacking it when need be). */
  imageRoot(image: string): Promise<ImageRootfs> {
    return this.rootfs.get(image);
  }

  /** Whether this machine can run the backend: root, cgroups, the runtimes and their versions. */
  checkHost(): Promise<HostCheck> {
    return checkHost(this.host);
  }

  async health(): Promise<BackendHealth> {
    const host = await checkHost(this.host);
    const present: string[] = [];
    const missing: string[] = [];
    await Promise.all(
      this.images.map(async (image) => {
        if (await this.rootfs.present(image)) present.push(image);
        else missing.push(image);
      }),
    );
    const problems = [
      ...host.problems,
      ...(missing.length ? [`images missing: ${missing.join(', ')} (run \`sandpit images build\`)`] : []),
    ];
    return {
      ok: problems.length === 0,
      backend: this.name,
      detail: problems.length
        ? problems.join('; ')
        : `runtimes ${host.runtimes.join(', ')}; every sandbox image unpacked`,
      images: { present: present.sort(), missing: missing.sort() },
      runtimes: host.runtimes,
    };
  }

  /** Stops taking runs and waits for those under way to end and be removed. */
  async close(): Promise<void> {
    clearInterval(this.reaping);
    this.executions.close();
    this.removals.close();
    await this.sessions.closeAll();
    await this.executions.settled();
    await this.removals.settled();
    await this.fileStore.close();
    await this.gates?.close();
  }
}

/** The runtime a spec names: runc by default, or gVisor's runsc. */
export function runtimeOf(runtime: string | undefined): OciRuntime {
  if (runtime === undefined || runtime === 'runc') return 'runc';
  if (runtime === 'runsc') return 'runsc';
  throw new AppError('RUNTIME_NOT_FOUND', `the oci backend has no runtime "${runtime}"`, {
    hint: 'the oci backend runs runc or runsc',
  });
}
