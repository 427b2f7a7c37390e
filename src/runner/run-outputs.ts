/**
 * What a result says of a run's output files, from what its sandbox returned (or did not: a run
 * whose sandbox ended before collecting names every entry it could not collect). Both backends
 * build it here. Pure.
 */
import { MEDIA_HEAD_BYTES } from '../api/media.js';
import { buildRunOutputs, type RunOutputs } from '../api/outputs.js';
import type { EffectiveOutputs } from '../policy/evaluate.js';
import type { ReturnedOutputs } from './output-files.js';

const NOT_COLLECTED = 'the sandbox ended before its files were collected';

/** What the sandbox returned, with every file it returned named as not kept, and why. */
export function notKept(returned: ReturnedOutputs, message: string): ReturnedOutputs {
  return {
    files: [],
    skipped: [
      ...returned.files.map((f) => ({ entry: f.path, reason: 'Unreadable' as const, message })),
      ...returned.skipped,
    ],
  };
}

/** Undefined when the run asked for no outputs. */
export function runOutputsOf(
  asked: EffectiveOutputs,
  returned: ReturnedOutputs | undefined,
): RunOutputs | undefined {
  if (asked.entries.length === 0 && asked.refused.length === 0) return undefined;
  const got = returned ?? {
    files: [],
    skipped: asked.entries.map((entry) => ({ entry, reason: 'Unreadable' as const, message: NOT_COLLECTED })),
  };
  return buildRunOutputs(
    got.files.map((f) => ({
      path: f.path,
      bytes: f.data.length,
      head: f.data.subarray(0, MEDIA_HEAD_BYTES),
    })),
    [...asked.refused, ...got.skipped],
    asked.caps,
  );
}
