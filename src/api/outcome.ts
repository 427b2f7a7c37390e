/**
 * How a run's facts become the shared phase and reason (DESIGN.md §4a). Pure, and used by every
 * backend and the operator, so that the same program reports the same outcome everywhere.
 */
import type { Phase, Reason } from './run.js';

/** What a backend observed about how a run ended. */
export interface RunFacts {
  exitCode: number | null;
  timedOut: boolean;
  oomKilled: boolean;
  cancelled: boolean;
  /** The sandbox itself failed (runner error, engine error): the program's outcome is unknown. */
  failure?: string;
}

/** A run stopped by its caller: no exit code, nothing else to report. */
export const CANCELLED_FACTS: RunFacts = {
  exitCode: null,
  timedOut: false,
  oomKilled: false,
  cancelled: true,
};

/** A run whose sandbox failed before the program could report anything. */
export function failedFacts(failure: string): RunFacts {
  return { exitCode: null, timedOut: false, oomKilled: false, cancelled: false, failure };
}

/** How a run ended, in the shared names: what results, statuses and audit records carry. */
export interface Outcome {
  phase: Phase;
  reason?: Reason | undefined;
  message?: string | undefined;
  exitCode: number | null;
}

export function classify(f: RunFacts): Outcome {
  const { exitCode } = f;
  if (f.cancelled)
    return { phase: 'Cancelled', reason: 'Cancelled', message: 'the run was cancelled', exitCode };
  if (f.timedOut)
    return { phase: 'TimedOut', reason: 'DeadlineExceeded', message: 'the deadline ended the run', exitCode };
  if (f.oomKilled)
    return {
      phase: 'Failed',
      reason: 'OOMKilled',
      message: 'the program ran out of memory and was killed',
      exitCode,
    };
  if (f.failure !== undefined)
    return { phase: 'Failed', reason: 'BackendError', message: f.failure, exitCode };
  if (exitCode === 0) return { phase: 'Succeeded', reason: 'Completed', exitCode };
  return {
    phase: 'Failed',
    reason: 'Error',
    message: `the program exited with code ${exitCode ?? 'unknown'}`,
    exitCode,
  };
}
