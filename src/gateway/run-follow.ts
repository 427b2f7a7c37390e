/**
 * An idempotent repeat of a run this process follows: the caller gets the same run, not a new one.
 * While the run is live, the repeat is handed the output so far and then each piece as it comes;
 * once it ended, the result as it is kept. A repeat is a caller of the run like the first one: its
 * cancellation (or, on stateless HTTP, its disconnect) cancels the run (docs/mcp.md).
 */
import type { RunResult } from '../api/run.js';
import { onAbort } from '../shared/abort.js';
import { AppError } from '../shared/errors.js';
import type { LiveChunk } from './live-output.js';
import type { RunRecord } from './run-store.js';
import type { RunHandle, StartRunOptions } from './run-handle.js';

export function followRecord(
  record: RunRecord,
  options: StartRunOptions,
  delivered: () => void,
  current: () => RunResult,
): RunHandle {
  const { onOutput, signal } = options;
  let stop = (): void => undefined;
  if (!record.result) {
    if (onOutput) {
      for (const chunk of sofar(record)) onOutput(chunk);
      record.followers.add(onOutput);
    }
    const detach = onAbort(signal, () =>
      record.controller.abort(new AppError('CANCELLED', 'the run was cancelled')),
    );
    stop = () => {
      detach();
      if (onOutput) record.followers.delete(onOutput);
    };
  }
  const result = record.settled.then(() => {
    stop();
    return current();
  });
  return { runId: record.runId, result, delivered, recorded: Promise.resolve() };
}

/** The output a live run has written so far, as one chunk per stream. */
function sofar(record: RunRecord): LiveChunk[] {
  const text = record.live?.text;
  if (!text) return [];
  return (['stdout', 'stderr'] as const)
    .filter((stream) => text[stream] !== '')
    .map((stream) => ({ stream, data: Buffer.from(text[stream], 'utf8'), text: text[stream] }));
}
