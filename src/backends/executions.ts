/**
 * What every backend's `start()` shares: a queue for the live output, the signal that the sandbox
 * is gone, and the set of runs `close()` waits for.
 */
import type { RunResult } from '../api/run.js';
import { AsyncQueue } from '../shared/async-queue.js';
import type { OutputChunk } from './output.js';
import type { RunExecution } from './types.js';

export type Execute = (output: AsyncQueue<OutputChunk>, cleanedUp: () => void) => Promise<RunResult>;

export class Executions {
  private readonly active = new Set<Promise<void>>();
  private readonly untilCleanedUp: boolean;

  /** `untilCleanedUp`: whether `settled()` also waits for each sandbox to be removed. */
  constructor(options: { untilCleanedUp: boolean }) {
    this.untilCleanedUp = options.untilCleanedUp;
  }

  start(runId: string, execute: Execute): RunExecution {
    const output = new AsyncQueue<OutputChunk>();
    let markCleanedUp!: () => void;
    const cleanedUp = new Promise<void>((r) => (markCleanedUp = r));
    const result = execute(output, markCleanedUp).finally(() => output.end());
    const done = (): Promise<void> | undefined => (this.untilCleanedUp ? cleanedUp : undefined);
    const settled = result.then(done, done);
    this.active.add(settled);
    void settled.finally(() => this.active.delete(settled));
    return { runId, output, result, cleanedUp };
  }

  /** Resolves once every run started so far has settled. */
  async settled(): Promise<void> {
    await Promise.all(this.active);
  }
}
