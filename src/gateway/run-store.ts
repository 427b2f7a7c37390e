/**
 * Runs the gateway knows about: live ones and a bounded history of finished ones, so `get_run`
 * still answers after a run ends or is cancelled.
 */
import { StringDecoder } from 'node:string_decoder';
import type { RunResult } from '../api/run.js';
import type { OutputChunk } from '../backends/output.js';

export interface RunRecord {
  runId: string;
  principal: string;
  createdAt: number;
  controller: AbortController;
  result: RunResult | undefined;
  /** Settles when the run ends (never rejects). */
  settled: Promise<void>;
  /** Live output seen so far, bounded by the output window of the run. */
  live: { stdout: string; stderr: string };
  decoders?: { stdout: StringDecoder; stderr: StringDecoder };
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

  appendLive(record: RunRecord, chunk: OutputChunk): void {
    // One decoder per stream, so a character split across two chunks is not garbled.
    record.decoders ??= { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
    record.live[chunk.stream] += record.decoders[chunk.stream].write(chunk.data);
  }

  /** Drops the oldest finished runs beyond the history bound. */
  finish(record: RunRecord, result: RunResult): void {
    record.result = result;
    record.live = { stdout: '', stderr: '' };
    const finished = [...this.records.values()].filter((r) => r.result);
    for (const old of finished.slice(0, Math.max(0, finished.length - this.maxFinished))) {
      this.records.delete(old.runId);
    }
  }

  active(): RunRecord[] {
    return [...this.records.values()].filter((r) => !r.result);
  }
}
