/**
 * What every backend's `start()` shares: a queue for the live output, the signal that the sandbox
 * is gone, the set of runs `close()` waits for, and the gate in front of each run: no new run once
 * the backend is closing, and a run whose caller already gave up ends Cancelled without a sandbox.
 */
import { CANCELLED_FACTS, classify } from '../api/outcome.js';
import { buildResult } from '../api/result.js';
import type { RunResult } from '../api/run.js';
import type { EffectiveSpec } from '../policy/evaluate.js';
import type { OutputChunk } from '../runner/capture.js';
import { AsyncQueue } from '../shared/async-queue.js';
import { AppError } from '../shared/errors.js';
import type { RunExecution, StartOptions } from './types.js';

/** What a backend's execution of one run is given. */
export interface ExecutionContext {
  /** Where the run's live output goes. */
  output: AsyncQueue<OutputChunk>;
  /** Call once the run's sandbox is gone. */
  cleanedUp: () => void;
  startedAt: number;
}

export type Execute = (ctx: ExecutionContext) => Promise<RunResult>;

export class Executions {
  private readonly active = new Set<Promise<void>>();
  private readonly backend: string;
  private readonly untilCleanedUp: boolean;
  private closing = false;

  /**
   * `backend`: the name results carry (and errors say). `untilCleanedUp`: whether `settled()` also
   * waits for each sandbox to be removed.
   */
  constructor(options: { backend: string; untilCleanedUp: boolean }) {
    this.backend = options.backend;
    this.untilCleanedUp = options.untilCleanedUp;
  }

  start(spec: EffectiveSpec, options: StartOptions, execute: Execute): RunExecution {
    const { runId } = options;
    const output = new AsyncQueue<OutputChunk>();
    let markCleanedUp!: () => void;
    const cleanedUp = new Promise<void>((r) => (markCleanedUp = r));
    const ctx: ExecutionContext = { output, cleanedUp: markCleanedUp, startedAt: Date.now() };
    const result = this.gate(spec, options, ctx, execute).finally(() => output.end());
    const done = (): Promise<void> | undefined => (this.untilCleanedUp ? cleanedUp : undefined);
    const settled = result.then(done, done);
    this.active.add(settled);
    void settled.finally(() => this.active.delete(settled));
    return { runId, output, result, cleanedUp };
  }

  private async gate(
    spec: EffectiveSpec,
    { runId, signal }: StartOptions,
    ctx: ExecutionContext,
    execute: Execute,
  ): Promise<RunResult> {
    const { cleanedUp, startedAt } = ctx;
    if (this.closing) {
      cleanedUp();
      throw new AppError('BACKEND_ERROR', `the ${this.backend} backend is shutting down`, {
        hint: 'retry on another instance',
      });
    }
    if (signal?.aborted) {
      cleanedUp();
      return this.cancelled(spec, runId, startedAt);
    }
    return execute(ctx);
  }

  /** The result of a run its caller cancelled before a sandbox ran it. */
  cancelled(spec: EffectiveSpec, runId: string, startedAt: number): RunResult {
    return buildResult({
      runId,
      subject: spec,
      outcome: classify(CANCELLED_FACTS),
      startedAt,
      finishedAt: Date.now(),
      backend: this.backend,
      served: 'cold',
    });
  }

  /** Refuses new runs from now on; `settled()` still waits for the ones already started. */
  close(): void {
    this.closing = true;
  }

  /** Resolves once every run started so far has settled. */
  async settled(): Promise<void> {
    await Promise.all(this.active);
  }
}
