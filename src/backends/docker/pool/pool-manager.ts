/**
 * The warm pools of the Docker backend (DESIGN.md §6): one per container shape, created on first
 * demand or pre-warmed from config, refilled in the background within per-pool and global caps.
 * A claim hands over a started, hardened container whose runner already waits for its job, so a
 * run costs about one process spawn. Containers are never reused.
 */
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import type { Logger } from '../../../observability/logger.js';
import type { Metrics } from '../../../observability/metrics.js';
import { backoffDelay } from '../../../shared/backoff.js';
import { pollUntil, withTimeout } from '../../../shared/time.js';
import { AttachedRunner } from '../attached-runner.js';
import { buildContainerConfig } from '../container-config.js';
import { SessionContainer } from '../session/session-container.js';
import type { EgressGate, SocketGates } from '../../../egress/socket-gates.js';
import { newKey } from '../../../runner/session-protocol.js';
import type { PoolOptions } from './pool-options.js';
import { poolKey, shapeOf, type RunnerMode, type SandboxShape } from '../../../policy/shape.js';
import { WarmPool, type PoolMember } from './warm-pool.js';
import type { EffectiveSpec } from '../../../policy/evaluate.js';

/** A pre-warmed run pool's shape, with the variables of the spec it was made from (its template's). */
export type PrewarmShape = SandboxShape & Pick<EffectiveSpec, 'env'>;

const READY_TIMEOUT_MS = 30_000;
/** Extra life a pool container's expiry label gets, for slow starts and removal. */
const EXPIRY_SLACK_MS = 5 * 60_000;
/** Failed starts back off from this, doubling, so an engine that is down is not hammered. */
const START_BACKOFF = { initialMs: 1000, maxMs: 30_000 };
/**
 * How long after a claimed container's result its replacement starts. A start costs a few hundred
 * ms of CPU on the cores that serialise and write the reply (its output and files): measured on
 * two cores, starting it at once added about 20 ms to a warm run's reply.
 */
export const REFILL_AFTER_REPLY_MS = 300;

export interface PoolStats {
  template: string;
  idle: number;
  starting: number;
}

export interface PoolManagerDeps {
  docker: Docker;
  owner: string;
  /** The gateway instance a session pool's containers are labelled with (for adoption after a restart). */
  instance?: string | undefined;
  options: PoolOptions;
  /** The egress proxy's gates: an egress pool's containers each get one at creation, refusing until claimed. */
  gates?: SocketGates | undefined;
  metrics?: Metrics | undefined;
  logger?: Logger | undefined;
}

export class PoolManager {
  private readonly deps: PoolManagerDeps;
  private readonly pools = new Map<string, WarmPool>();
  private starting = 0;
  /** Consecutive failed starts: the retry delay doubles with each (START_BACKOFF). */
  private failures = 0;
  /** Moving average of how long a pool container takes to start and report ready. */
  private startSeconds = 0.4;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  /** A replenish() waiting for its reply to go out. */
  private refill: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(deps: PoolManagerDeps) {
    this.deps = deps;
  }

  /**
   * Starts the pools: the periodic check that ages out and replaces idle containers, and the
   * pools for `prewarm`'s shapes (runs) and `sessions`' (sessions), filling at once; others are
   * made on first demand.
   */
  start(prewarm: PrewarmShape[] = [], sessions: SandboxShape[] = []): void {
    if (this.closed) return;
    if (!this.timer) {
      this.timer = setInterval(() => void this.check(), this.deps.options.checkIntervalSeconds * 1000);
      this.timer.unref();
    }
    for (const shape of prewarm) this.poolFor(shape, 'run', true, shape.env);
    for (const shape of sessions) this.poolFor(shape, 'session', true);
    this.pump();
  }

  /**
   * A ready container of exactly this shape, or undefined (the caller then starts one cold). On a
   * hit the replacement is not started here: a container start costs a few hundred ms of CPU on
   * the same cores as the claimed run, so the caller calls `replenish()` once it has its result.
   */
  claim(shape: SandboxShape): AttachedRunner | undefined {
    return this.take(shape, 'run') as AttachedRunner | undefined;
  }

  /** A ready session-mode container of exactly this shape (its runner waits for the open), or undefined. */
  claimSession(shape: SandboxShape): SessionContainer | undefined {
    return this.take(shape, 'session') as SessionContainer | undefined;
  }

  private take(shape: SandboxShape, mode: RunnerMode): PoolMember | undefined {
    if (this.closed) return undefined;
    const pool = this.poolFor(shape, mode);
    const runner = pool.take(Date.now());
    this.deps.metrics?.poolClaims.inc({ template: pool.label, result: runner ? 'hit' : 'miss' });
    if (!runner || pool.idleCount === 0) this.pump();
    return runner;
  }

  /**
   * Starts what the pools are short of, REFILL_AFTER_REPLY_MS from now: the backend calls it when
   * a claimed container's run (or session open) has its result, whose reply goes out first.
   */
  replenish(): void {
    if (this.refill || this.closed) return;
    this.refill = setTimeout(() => {
      this.refill = undefined;
      this.pump();
    }, REFILL_AFTER_REPLY_MS);
    this.refill.unref();
  }

  /**
   * Resolves once every pool holds at least `minIdle` ready containers and no start is under way
   * or waiting (or the timeout passes): a pool that saw claims lately fills past `minIdle`.
   */
  filled(timeoutMs = 30_000): Promise<boolean> {
    const { minIdle } = this.deps.options;
    const quiet = (): boolean =>
      this.starting === 0 && !this.refill && [...this.pools.values()].every((p) => p.idleCount >= minIdle);
    return pollUntil(quiet, { intervalMs: 50, timeoutMs });
  }

  stats(): PoolStats[] {
    return [...this.pools.values()].map((p) => ({
      template: p.label,
      idle: p.idleCount,
      starting: p.starting,
    }));
  }

  get total(): number {
    let n = 0;
    for (const p of this.pools.values()) n += p.size;
    return n;
  }

  /** Stops refilling and removes every pool container, waiting for starts in flight. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.refill);
    await Promise.all([...this.pools.values()].flatMap((p) => p.drain()).map((r) => r.remove()));
    await Promise.all(this.inFlight);
    this.report();
  }

  private poolFor(
    shape: SandboxShape,
    mode: RunnerMode,
    pinned = false,
    preloadEnv?: EffectiveSpec['env'],
  ): WarmPool {
    const key = poolKey(shape, mode);
    let pool = this.pools.get(key);
    if (!pool) {
      pool = new WarmPool(key, shapeOf(shape), { mode, pinned, now: Date.now(), preloadEnv });
      this.pools.set(key, pool);
    }
    return pool;
  }

  /** A session pool's container must outlive its open-within only if nobody claims it. */
  private configFor(
    pool: WarmPool,
    started: number,
    gate: EgressGate | undefined,
  ): Docker.ContainerCreateOptions {
    const { maxIdleSeconds, maxRunSeconds } = this.deps.options;
    const common = {
      name: `sandpit-pool-${pool.label}-${randomBytes(4).toString('hex')}`,
      kind: 'pool' as const,
      owner: this.deps.owner,
      // Garbage for any reaper after its idle life and its longest run, whoever its owner is. A
      // claimed session outlives it: the reaper never expires a running session container.
      expiresAt: started + (maxIdleSeconds + maxRunSeconds) * 1000 + EXPIRY_SLACK_MS,
      egressDir: gate?.dir,
    };
    if (pool.mode === 'run')
      return buildContainerConfig(pool.shape, { ...common, preloadEnv: pool.preloadEnv });
    return buildContainerConfig(pool.shape, {
      ...common,
      mode: 'session',
      // Unclaimed past its idle life, the runner exits by itself.
      session: { instance: this.deps.instance, openWithinSeconds: maxIdleSeconds + 60, key: newKey() },
    });
  }

  /** An egress pool's container gets its own gate, unbound (refusing) until a run or session claims it. */
  private async gateFor(pool: WarmPool): Promise<EgressGate | undefined> {
    if (pool.shape.network.egress === 'none') return undefined;
    if (!this.deps.gates) throw new Error('egress sandboxes need the egress proxy, which is not running');
    return this.deps.gates.open();
  }

  /** Starts containers for the neediest pools while the global caps allow. */
  private pump(): void {
    const { options } = this.deps;
    while (!this.closed && this.starting < options.maxStarting && this.total < options.maxTotal) {
      const now = Date.now();
      let neediest: WarmPool | undefined;
      let deficit = 0;
      for (const pool of this.pools.values()) {
        const want = pool.target(now, options.minIdle, options.maxSize, this.startSeconds) - pool.size;
        if (want > deficit) {
          deficit = want;
          neediest = pool;
        }
      }
      if (!neediest) break;
      this.startOne(neediest);
    }
    this.report();
  }

  private startOne(pool: WarmPool): void {
    pool.starting++;
    this.starting++;
    const started = Date.now();
    const work = (async () => {
      let runner: PoolMember | undefined;
      try {
        const gate = await this.gateFor(pool);
        const config = this.configFor(pool, started, gate);
        runner =
          pool.mode === 'session'
            ? await SessionContainer.start(this.deps.docker, config, gate)
            : await AttachedRunner.start(this.deps.docker, config, gate);
        const ready = await withTimeout(
          runner.ready(),
          READY_TIMEOUT_MS,
          'the pool container did not report ready',
        );
        if (!ready) throw new Error('the pool container exited before it was ready');
        const seconds = (Date.now() - started) / 1000;
        this.startSeconds = this.startSeconds * 0.8 + seconds * 0.2;
        this.deps.metrics?.poolRefill.observe({ template: pool.label }, seconds);
        if (this.closed) {
          await runner.remove();
          return;
        }
        pool.add(runner, Date.now());
        this.watch(pool, runner);
        this.failures = 0;
      } catch (e) {
        this.failures++;
        const retryInMs = backoffDelay(this.failures, START_BACKOFF);
        // Warn once per streak: an engine that is down would otherwise be reported every second.
        const fields = { template: pool.label, err: (e as Error).message, retryInMs };
        if (this.failures === 1) this.deps.logger?.warn(fields, 'a pool container failed to start');
        else this.deps.logger?.debug(fields, 'a pool container failed to start');
        await runner?.remove();
        await new Promise((r) => setTimeout(r, retryInMs).unref());
      } finally {
        pool.starting--;
        this.starting--;
        this.pump();
      }
    })();
    this.inFlight.add(work);
    void work.finally(() => this.inFlight.delete(work));
  }

  /** A container that dies while idle (killed by hand, crashed) is removed and replaced. */
  private watch(pool: WarmPool, runner: PoolMember): void {
    void runner.ended.then(() => {
      if (pool.drop(runner)) {
        this.deps.logger?.warn({ template: pool.label }, 'an idle pool container died; replacing it');
        void runner.remove();
        this.pump();
      }
    });
  }

  /** Ages out old idle containers, drops pools no run asked for lately, replaces dead containers. */
  private async check(): Promise<void> {
    const now = Date.now();
    this.dropUnused(now);
    for (const pool of this.pools.values()) {
      for (const old of pool.expire(now, this.deps.options.maxIdleSeconds * 1000)) void old.remove();
      await Promise.all(
        pool.idleRunners().map(async (runner) => {
          const state = await runner.container.inspect().then(
            (i) => i.State,
            () => undefined,
          );
          if (!state?.Running || state.Paused || state.Restarting) {
            pool.drop(runner);
            void runner.remove();
          }
        }),
      );
    }
    this.pump();
  }

  /** A pool for a one-off shape would otherwise be refilled forever. */
  private dropUnused(now: number): void {
    const maxAgeMs = this.deps.options.maxIdleSeconds * 1000;
    for (const [key, pool] of this.pools) {
      if (pool.pinned || pool.starting > 0 || now - pool.lastDemand <= maxAgeMs) continue;
      this.pools.delete(key);
      for (const runner of pool.drain()) void runner.remove();
      this.deps.metrics?.poolContainers.set({ template: pool.label, state: 'idle' }, 0);
      this.deps.logger?.debug({ template: pool.label }, 'dropped a pool no run asked for');
    }
  }

  private report(): void {
    const gauge = this.deps.metrics?.poolContainers;
    if (!gauge) return;
    for (const pool of this.pools.values()) {
      gauge.set({ template: pool.label, state: 'idle' }, pool.idleCount);
      gauge.set({ template: pool.label, state: 'starting' }, pool.starting);
    }
  }
}
