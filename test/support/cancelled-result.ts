/** The result a stand-in backend gives a run whose signal aborted: Cancelled, no exit code. */
import { classify } from '../../src/api/outcome.js';
import { buildResult } from '../../src/api/result.js';
import type { RunResult } from '../../src/api/run.js';
import type { EffectiveSpec } from '../../src/policy/evaluate.js';

export function cancelledResult(spec: EffectiveSpec, runId: string, backend: string): RunResult {
  return buildResult({
    runId,
    subject: spec,
    outcome: classify({ exitCode: null, timedOut: false, oomKilled: false, cancelled: true }),
    startedAt: 0,
    finishedAt: 1,
    backend,
  });
}
