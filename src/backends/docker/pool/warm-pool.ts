/**
 * One pool: ready containers of one shape, each waiting on its attached stdin for its one job.
 * A claimed container leaves the pool for good; it is never given a second job.
 */
import type { AttachedRunner } from '../attached-runner.js';
import type { ContainerShape } from '../container-config.js';

const DEMAND_WINDOW_MS = 2000;

interface Idle {
  runner: AttachedRunner;
  since: number;
}

export class WarmPool {
  readonly key: string;
  readonly shape: ContainerShape;
  /** Pre-warmed from config: kept however long it goes unused. */
  readonly pinned: boolean;
  starting = 0;
  /** When a run last asked this pool for a container (or when it was made). */
  lastDemand: number;
  private idle: Idle[] = [];
  private claims: number[] = [];

  constructor(key: string, shape: ContainerShape, options: { pinned: boolean; now: number }) {
    this.key = key;
    this.shape = shape;
    this.pinned = options.pinned;
    this.lastDemand = options.now;
  }

  get label(): string {
    return this.shape.template ?? 'custom';
  }

  get idleCount(): number {
    return this.idle.length;
  }

  get size(): number {
    return this.idle.length + this.starting;
  }

  /** Takes the oldest ready container, or none. Every call counts as demand. */
  take(now: number): AttachedRunner | undefined {
    this.claims.push(now);
    this.lastDemand = now;
    return this.idle.shift()?.runner;
  }

  add(runner: AttachedRunner, now: number): void {
    this.idle.push({ runner, since: now });
  }

  /** Drops a container that died or failed a check; true if it was idle here. */
  drop(runner: AttachedRunner): boolean {
    const before = this.idle.length;
    this.idle = this.idle.filter((i) => i.runner !== runner);
    return this.idle.length < before;
  }

  /** Idle containers older than `maxAgeMs`, removed from the pool. */
  expire(now: number, maxAgeMs: number): AttachedRunner[] {
    const old = this.idle.filter((i) => now - i.since > maxAgeMs).map((i) => i.runner);
    this.idle = this.idle.filter((i) => now - i.since <= maxAgeMs);
    return old;
  }

  idleRunners(): AttachedRunner[] {
    return this.idle.map((i) => i.runner);
  }

  drain(): AttachedRunner[] {
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
