/**
 * Runs the gateway knows about: live ones and a history of finished ones, so `get_run` still
 * answers after a run ends or is cancelled. The history is bounded by bytes, not only by count:
 * a finished result is held whole only until it has been delivered to the caller who started the
 * run; from then on only a short tail of each stream stays. Over the budget, the oldest whole
 * results are cut to their tails first, then the oldest runs go.
 */
import type { RunSubject } from '../api/result.js';
import type { RunResult } from '../api/run.js';
import type { LiveChunk, LiveOutput } from './live-output.js';

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
  /** Callers of an idempotent repeat that stream this run's output too (run-follow.ts). */
  followers: Set<(chunk: LiveChunk) => void>;
  /** Where the run was started under an idempotency key: the digest of its request. */
  requestDigest?: string | undefined;
  /**
   * Set for a run no call waits on (an MCP task's, a REST `?wait=false` run) on a backend that can
   * leave it running without this process (RunExecution.release): a shutdown lets it go rather
   * than cancel it.
   */
  release?: (() => void) | undefined;
  /** This process let the run go (release): it goes on, answered from the backend's record. */
  released?: boolean;
}

export interface HistoryOptions {
  /** Bytes of finished results kept in all (their output text, mostly). */
  maxBytes: number;
  /** Finished runs kept at most. */
  maxRuns: number;
  /** Bytes of each stream kept once a result has been delivered. */
  deliveredTailBytes: number;
}

export const DEFAULT_HISTORY: HistoryOptions = {
  maxBytes: 32 * 1024 ** 2,
  maxRuns: 1000,
  deliveredTailBytes: 4096,
};

/** What a kept result costs besides its output: its fields, names and timestamps. */
const RESULT_OVERHEAD_BYTES = 1024;

export class RunStore {
  private readonly records = new Map<string, RunRecord>();
  /** Finished runs, oldest first, with what each costs. */
  private readonly finished = new Map<string, number>();
  /** Finished runs whose result is cut to its tails already. */
  private readonly cut = new Set<string>();
  private finishedBytes = 0;
  private readonly options: HistoryOptions;
  private readonly onDrop: (runId: string) => void;

  /** `onDrop`: told of every run whose record goes (its output files may go with it). */
  constructor(options: Partial<HistoryOptions> = {}, onDrop: (runId: string) => void = () => {}) {
    this.options = { ...DEFAULT_HISTORY, ...options };
    this.onDrop = onDrop;
  }

  add(record: RunRecord): void {
    this.records.set(record.runId, record);
  }

  get(runId: string): RunRecord | undefined {
    return this.records.get(runId);
  }

  /** Records the result of a run that ended; the oldest results are cut, then dropped, beyond the bounds. */
  finish(record: RunRecord, result: RunResult): void {
    record.live = undefined;
    this.account(record, result);
    this.enforce();
  }

  /** The result is with its caller now: only a short tail of each stream stays. */
  delivered(runId: string): void {
    const record = this.records.get(runId);
    if (record?.result && !this.cut.has(runId)) this.cutToTails(record);
  }

  /** The results of the owner's finished runs, the newest first. */
  finishedOf(owner: string): RunResult[] {
    const results: RunResult[] = [];
    for (const runId of [...this.finished.keys()].reverse()) {
      const record = this.records.get(runId);
      if (record?.owner === owner && record.result) results.push(record.result);
    }
    return results;
  }

  /** Forgets a run at once (one started under a key that the backend failed before it ran). */
  forget(runId: string): void {
    this.drop(runId);
  }

  active(): RunRecord[] {
    return [...this.records.values()].filter((r) => !r.result);
  }

  /** Bytes the finished history holds now (never more than `maxBytes` once a call returns). */
  get historyBytes(): number {
    return this.finishedBytes;
  }

  private enforce(): void {
    const { maxBytes, maxRuns } = this.options;
    for (const runId of this.finished.keys()) {
      if (this.finishedBytes <= maxBytes) break;
      const record = this.records.get(runId);
      if (record && !this.cut.has(runId)) this.cutToTails(record);
    }
    for (const runId of this.finished.keys()) {
      if (this.finishedBytes <= maxBytes && this.finished.size <= maxRuns) break;
      this.drop(runId);
    }
  }

  private cutToTails(record: RunRecord): void {
    this.cut.add(record.runId);
    this.account(record, trimResult(record.result!, this.options.deliveredTailBytes));
  }

  /** Sets the record's result, keeping its place in the age order and the byte count right. */
  private account(record: RunRecord, result: RunResult): void {
    record.result = result;
    const cost = resultBytes(result);
    this.finishedBytes += cost - (this.finished.get(record.runId) ?? 0);
    this.finished.set(record.runId, cost);
  }

  private drop(runId: string): void {
    this.finishedBytes -= this.finished.get(runId) ?? 0;
    this.finished.delete(runId);
    this.cut.delete(runId);
    this.records.delete(runId);
    this.onDrop(runId);
  }
}

/** What a kept result costs, counting two bytes a character (the most V8 needs). */
function resultBytes(result: RunResult): number {
  const chars = result.stdout.length + result.stderr.length + (result.message?.length ?? 0);
  return RESULT_OVERHEAD_BYTES + 2 * chars + outputsBytes(result);
}

/** What the list of a result's output files costs (each file's bytes are the backend's). */
function outputsBytes(result: RunResult): number {
  const o = result.outputs;
  if (!o) return 0;
  const entries = [
    ...o.files.map((f) => f.path + (f.note ?? '')),
    ...o.skipped.map((s) => s.entry + s.message),
  ];
  return entries.reduce((n, text) => n + 128 + 2 * text.length, 0);
}

/** The result with each stream cut to its last `tailBytes` bytes (counts and flags say what it was). Pure. */
export function trimResult(result: RunResult, tailBytes: number): RunResult {
  const stdout = lastBytes(result.stdout, tailBytes);
  const stderr = lastBytes(result.stderr, tailBytes);
  if (stdout === result.stdout && stderr === result.stderr) return result;
  return { ...result, stdout, stderr, truncated: true };
}

function lastBytes(text: string, max: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= max) return text;
  let start = buf.length - max;
  while (start < buf.length && (buf[start]! & 0xc0) === 0x80) start++;
  return `[… the first ${start} bytes are not kept after the result was delivered …]\n${buf.subarray(start).toString('utf8')}`;
}
