/**
 * One pool: ready containers of one shape and runner mode, each waiting on its attached stdin for
 * its one job (or its one session). A claimed container leaves the pool for good; it is never
 * given a second one.
 */
import type Docker from 'dockerode';
import type { EffectiveSpec } from '../../../policy/evaluate.js';
import type { RunnerMode, SandboxShape } from '../../../policy/shape.js';

const DEMAND_WINDOW_MS = 2000;

/** What a pool holds: a started container whose runner reports ready. */
export interface PoolMember {
  readonly container: Docker.Container;
  readonly alive: boolean;
  readonly ended: Promise<void>;
  ready(): Promise<boolean>;
  remove(): Promise<void>;
}

interface Idle<T> {
  runner: T;
  since: number;
}

export class WarmPool<T extends PoolMember = PoolMember> {
  readonly key: string;
  readonly shape: SandboxShape;
  readonly mode: RunnerMode;
  /** Pre-warmed from config: kept however long it goes unused. */
  readonly pinned: boolean;
  /** A pre-warmed run pool's template variables: its containers start the job's interpreter with them. */
  readonly preloadEnv: EffectiveSpec['env'] | undefined;
  starting = 0;
  /** When a run last asked this pool for a container (or when it was made). */
  lastDemand: number;
  private idle: Idle<T>[] = [];
  private claims: number[] = [];

  constructor(
    key: string,
    shape: SandboxShape,
    options: {
      mode?: RunnerMode;
      pinned: boolean;
      now: number;
      preloadEnv?: EffectiveSpec['env'] | undefined;
    },
  ) {
    this.key = key;
    this.shape = shape;
    this.mode = options.mode ?? 'run';
    this.pinned = options.pinned;
    this.preloadEnv = options.preloadEnv;
    this.lastDemand = options.now;
  }

  /** The metrics label: the template (custom when none), `-session` for a session pool. */
  get label(): string {
    return `${this.shape.template ?? 'custom'}${this.mode === 'session' ? '-session' : ''}`;
  }

  get idleCount(): number {
    return this.idle.length;
  }

  get size(): number {
    return this.idle.length + this.starting;
  }

  /** Takes the oldest ready container, or none. Every call counts as demand. */
  take(now: number): T | undefined {
    this.claims.push(now);
    this.lastDemand = now;
    return this.idle.shift()?.runner;
  }

  add(runner: T, now: number): void {
    this.idle.push({ runner, since: now });
  }

  /** Drops a container that died or failed a check; true if it was idle here. */
  drop(runner: T): boolean {
    const before = this.idle.length;
    this.idle = this.idle.filter((i) => i.runner !== runner);
    return this.idle.length < before;
  }

  /** Idle containers older than `maxAgeMs`, removed from the pool. */
  expire(now: number, maxAgeMs: number): T[] {
    const old = this.idle.filter((i) => now - i.since > maxAgeMs).map((i) => i.runner);
    this.idle = this.idle.filter((i) => now - i.since <= maxAgeMs);
    return old;
  }

  idleRunners(): T[] {
    return this.idle.map((i) => i.runner);
  }

  drain(): T[] {
    const all = this.idle.map((i) => i.runner);
    this.idle = [];
    return all;
  }

  /**
   * How many containers this pool wants: the floor, plus what recent demand would use up while
   * replacements start (with 50% headroom), up to the pool's cap.
   */
  target(now: number, minIdle: number, maxSize: number, startSeconds: number): number {
    this.claims = this.claims.filter((t) => now - t < DEMAND_WINDOW_MS);
    const rate = this.claims.length / (DEMAND_WINDOW_MS / 1000);
    return Math.min(maxSize, minIdle + Math.ceil(rate * startSeconds * 1.5));
  }
}
