/**
 * The clean-up a backend on one machine owes its runs (the sandbox's removal; on Docker, the
 * refill of the pool that served it), and what `close()` waits for. A run's clean-up waits until
 * its caller's reply is out (`StartOptions.replied`), at most REPLY_WAIT_MS: on a machine of two
 * cores, the runtime tearing one container down and starting the next would otherwise compete with
 * the reply for them (bench/outputs.bench.ts: the Docker warm path's p90 went from 63 to 45 ms).
 * Closing stops the waiting.
 */

/** The longest a finished run's sandbox waits for its reply to go out before it is removed. */
export const REPLY_WAIT_MS = 1000;

export class RunCleanups {
  private readonly pending = new Set<Promise<void>>();
  private readonly closing = new AbortController();

  /** Runs `work` once `replied` settles (at once without it), then calls `done`. Never throws. */
  after(replied: Promise<unknown> | undefined, work: () => Promise<void>, done: () => void): void {
    const tracked = this.replyOut(replied)
      .then(work)
      .catch(() => undefined)
      .finally(() => {
        this.pending.delete(tracked);
        done();
      });
    this.pending.add(tracked);
  }

  /** Stops waiting for replies, and resolves once every clean-up, including any begun meanwhile, settled. */
  async close(): Promise<void> {
    this.closing.abort();
    while (this.pending.size > 0) await Promise.all(this.pending);
  }

  private replyOut(replied: Promise<unknown> | undefined): Promise<void> {
    const closing = this.closing.signal;
    if (!replied || closing.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const out = (): void => {
        clearTimeout(timer);
        closing.removeEventListener('abort', out);
        resolve();
      };
      const timer = setTimeout(out, REPLY_WAIT_MS);
      closing.addEventListener('abort', out, { once: true });
      replied.then(out, out);
    });
  }
}
