/**
 * A pool whose pods keep failing (a runner that cannot start, an image that exits) must not
 * replace them in a hot loop: after each pass that finds failed pods, creating waits
 * backoffDelay(failures) (1 s doubling to 60 s); a pod of the pool being ready resets it.
 */
import { backoffDelay } from '../../shared/backoff.js';

export const FAILURE_BACKOFF = { initialMs: 1000, maxMs: 60_000 };

export class FailureBackoff {
  private readonly pools = new Map<string, { failures: number; untilMs: number }>();

  /** Records this pass's findings; returns how long creating must wait (0: create now). */
  next(key: string, o: { failed: number; anyReady: boolean; nowMs: number }): number {
    if (o.anyReady) this.pools.delete(key);
    const state = this.pools.get(key);
    if (o.failed > 0) {
      const failures = (state?.failures ?? 0) + 1;
      const untilMs = o.nowMs + backoffDelay(failures, FAILURE_BACKOFF);
      this.pools.set(key, { failures, untilMs });
      return untilMs - o.nowMs;
    }
    return state ? Math.max(0, state.untilMs - o.nowMs) : 0;
  }

  /** Passes in a row that found failed pods (0: none since a pod was ready). */
  failures(key: string): number {
    return this.pools.get(key)?.failures ?? 0;
  }

  forget(key: string): void {
    this.pools.delete(key);
  }
}
