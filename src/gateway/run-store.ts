/**
 * Runs the gateway knows about: live ones and a bounded history of finished ones, so `get_run`
 * still answers after a run ends or is cancelled.
 */
import type { RunSubject } from '../api/result.js';
import type { RunResult } from '../api/run.js';
import type { LiveOutput } from './live-output.js';

export interface RunRecord {
  runId: string;
  /** The owner's principal id: only it may read or cancel the run. */
  owner: string;
  createdAt: number;
  /** What runs: the result of a live run names it too. */
  subject: RunSubject;
  controller: AbortController;
  result: RunResult | undefined;
  /** Settles when the run ends (never rejects). */
  settled: Promise<void>;
  /** Live output seen so far, bounded by the output window of the run; dropped once it ends. */
  live: LiveOutput | undefined;
}

export class RunStore {
  private readonly records = new Map<string, RunRecord>();
  private readonly maxFinished: number;

  constructor(maxFinished = 1000) {
    this.maxFinished = maxFinished;
  }

  add(record: RunRecord): void {
    this.records.set(record.runId, record);
  }

  get(runId: string): RunRecord | undefined {
    return this.records.get(runId);
  }

  /** Drops the oldest finished runs beyond the history bound. */
  finish(record: RunRecord, result: RunResult): void {
    record.result = result;
    record.live = undefined;
    const finished = [...this.records.values()].filter((r) => r.result);
    for (const old of finished.slice(0, Math.max(0, finished.length - this.maxFinished))) {
      this.records.delete(old.runId);
    }
  }

  active(): RunRecord[] {
    return [...this.records.values()].filter((r) => !r.result);
  }
}
