/**
 * The removal of finished runs' sandboxes (Docker's containers, the OCI backend's), each started
 * REMOVE_AFTER_RESULT_MS after its run's result. Removing a container is the engine's work (its
 * runtime, mounts and cgroups) on the cores that serialise and write the result's reply: on two
 * cores, a warm run's reply over MCP HTTP took 12.6 ms with a 100 KB image (133 KB of base64 JSON)
 * and 5.0 ms without while the container went, against 8.1 and 2.3 ms after it. The runner waits
 * for it: after its exit frame it lingers until its owner hangs up
 * (images/runner/sandpit-runner.c), so the container's end comes with the removal. Once the
 * backend closes, every removal starts at once.
 */

/** How long after a run's result its sandbox's removal starts. */
export const REMOVE_AFTER_RESULT_MS = 100;

export class SandboxRemovals {
  private readonly waiting = new Map<NodeJS.Timeout, () => void>();
  private readonly running = new Set<Promise<void>>();
  private closing = false;
  private readonly delayMs: number;

  constructor(delayMs = REMOVE_AFTER_RESULT_MS) {
    this.delayMs = delayMs;
  }

  /**
   * Removes a sandbox after the delay; `removed` once it is gone. `remove` never throws. At once
   * while closing, and for a cancelled run (its `signal` aborted: its canceller waits for the
   * removal, and no reply is on its way).
   */
  schedule(remove: () => Promise<void>, removed: () => void, signal?: AbortSignal): void {
    const start = (): void => {
      const removal = remove().finally(() => {
        this.running.delete(removal);
        removed();
      });
      this.running.add(removal);
    };
    if (this.closing || signal?.aborted) return start();
    const timer = setTimeout(() => {
      this.waiting.delete(timer);
      start();
    }, this.delayMs);
    this.waiting.set(timer, start);
  }

  /** Starts every waiting removal now, and each later one at once (the backend is closing). */
  close(): void {
    this.closing = true;
    for (const [timer, start] of this.waiting) {
      clearTimeout(timer);
      start();
    }
    this.waiting.clear();
  }

  /** Resolves once every removal started so far is done. */
  async settled(): Promise<void> {
    await Promise.all(this.running);
  }
}
