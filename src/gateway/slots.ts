/**
 * Concurrency slots: a global cap with a bounded wait queue, and per-principal caps. Over a limit
 * the caller gets BUSY at once; the queue never grows past its bound.
 */
import { busy, type AppError } from '../shared/errors.js';
import { cancelled } from '../shared/abort.js';
import type { Principal } from './principal.js';

export interface SlotOptions {
  maxConcurrent: number;
  maxQueued: number;
  /** Longest a queued run waits for a slot before it gets BUSY. */
  maxWaitMs?: number;
}

interface Waiter {
  grant: () => void;
  reject: (e: AppError) => void;
}

export class Slots {
  private running = 0;
  private readonly queue: Waiter[] = [];
  private readonly perPrincipal = new Map<string, number>();
  private readonly options: Required<SlotOptions>;

  constructor(options: SlotOptions) {
    this.options = { maxWaitMs: 30_000, ...options };
  }

  get stats(): { running: number; queued: number } {
    return { running: this.running, queued: this.queue.length };
  }

  /** Waits for a slot; resolves to the function that gives it back. Counted per principal id. */
  async acquire(
    who: Pick<Principal, 'id' | 'name' | 'maxConcurrentRuns'>,
    signal?: AbortSignal,
  ): Promise<() => void> {
    // An aborted signal never fires 'abort' again: a queued caller would wait out maxWaitMs.
    if (signal?.aborted) throw cancelled(signal);
    const principal = who.id;
    const held = this.perPrincipal.get(principal) ?? 0;
    if (who.maxConcurrentRuns !== undefined && held >= who.maxConcurrentRuns) {
      throw busy(`"${who.name}" already has ${held} runs in progress, its limit`);
    }
    if (this.running >= this.options.maxConcurrent && this.queue.length >= this.options.maxQueued) {
      throw busy(`${this.running} runs in progress and ${this.queue.length} queued, the server's limit`);
    }
    this.perPrincipal.set(principal, held + 1);
    try {
      if (this.running < this.options.maxConcurrent) this.running++;
      else await this.wait(signal);
    } catch (e) {
      this.releasePrincipal(principal);
      throw e;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.releasePrincipal(principal);
      const next = this.queue.shift();
      if (next) next.grant();
      else this.running--;
    };
  }

  private wait(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => {
          cleanup();
          resolve();
        },
        reject: (e) => {
          cleanup();
          reject(e);
        },
      };
      const drop = (e: AppError): void => {
        const i = this.queue.indexOf(waiter);
        if (i >= 0) this.queue.splice(i, 1);
        waiter.reject(e);
      };
      const timer = setTimeout(
        () => drop(busy(`no slot came free within ${this.options.maxWaitMs} ms`)),
        this.options.maxWaitMs,
      );
      const onAbort = (): void => drop(cancelled(signal));
      const cleanup = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(waiter);
    });
  }

  private releasePrincipal(principal: string): void {
    const n = (this.perPrincipal.get(principal) ?? 1) - 1;
    if (n <= 0) this.perPrincipal.delete(principal);
    else this.perPrincipal.set(principal, n);
  }
}
