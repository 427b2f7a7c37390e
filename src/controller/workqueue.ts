/**
 * A keyed work queue, as controllers need it: a key waits in the queue at most once however often
 * it is added (de-duplicating); a key is never handed to two workers at once (per-key serialised:
 * added while in process, it is queued again when done); failures back off exponentially per key;
 * requeue-after timers keep only the earliest time per key. Keys, never object snapshots.
 */
import { backoffDelay } from '../shared/backoff.js';

export interface WorkQueueOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  /** Keys that need processing (queued, or added again while in process). */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private shuttingDown = false;

  constructor(options: WorkQueueOptions = {}) {
    this.baseDelayMs = options.baseDelayMs ?? 100;
    this.maxDelayMs = options.maxDelayMs ?? 60_000;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) this.hand(key, waiter);
    else this.queue.push(key);
  }

  /** Adds the key after `ms` (or earlier, if an earlier time is already set). */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Adds the key after its exponential backoff (base × 2^failures, capped). */
  addRateLimited(key: string): number {
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    const delay = backoffDelay(failures, { initialMs: this.baseDelayMs, maxMs: this.maxDelayMs });
    this.addAfter(key, delay);
    return delay;
  }

  /** Forgets the key's failures (its next backoff starts from the base again). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** The next key to process, or undefined once the queue shuts down. Pair every key with done(). */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.take(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key) && !this.shuttingDown) {
      const waiter = this.waiters.shift();
      if (waiter) this.hand(key, waiter);
      else this.queue.push(key);
    }
  }

  get length(): number {
    return this.queue.length;
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.queue.length = 0;
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
  }

  private take(key: string): void {
    this.dirty.delete(key);
    this.processing.add(key);
  }

  private hand(key: string, waiter: (key: string | undefined) => void): void {
    this.take(key);
    waiter(key);
  }
}
