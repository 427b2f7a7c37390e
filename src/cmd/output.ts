/**
 * How a program's result reaches the terminal, for `sandpit run` and `sandpit sessions exec` alike:
 * after the live head, the tail of a truncated stream and a line on how it ended; then the exit
 * code the command passes on (the program's own, or one that names what ended it).
 */
import type { RunResult } from '../api/run.js';

/** The fields of a run's or an exec's result that say how it ended. */
export type Ending = Pick<
  RunResult,
  'phase' | 'reason' | 'message' | 'exitCode' | 'stdout' | 'stderr' | 'truncated'
>;

/** After the live head: the truncation marker and tail, and a line on how the program ended. */
export function printEnding(result: Ending, shown: { stdout: number; stderr: number }): void {
  for (const stream of ['stdout', 'stderr'] as const) {
    const text = result[stream];
    const liveChars = Buffer.from(text).subarray(0, shown[stream]).toString('utf8').length;
    if (result.truncated && text.length > liveChars)
      (stream === 'stdout' ? process.stdout : process.stderr).write(text.slice(liveChars));
  }
  if (result.phase !== 'Succeeded' && result.reason !== 'Error') {
    process.stderr.write(`sandpit: ${result.phase} (${result.reason ?? ''}): ${result.message ?? ''}\n`);
  }
}

export function exitCodeOf(result: Pick<RunResult, 'phase' | 'reason' | 'exitCode'>): number {
  switch (result.phase) {
    case 'Succeeded':
    case 'Failed':
      if (result.reason === 'BackendError') return 70;
      return result.exitCode ?? 70;
    case 'TimedOut':
      return 124;
    case 'Cancelled':
      return 130;
    case 'Rejected':
      return 77;
    case 'Pending':
    case 'Running':
      return 70;
  }
}
