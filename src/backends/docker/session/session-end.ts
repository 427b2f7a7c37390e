/** How a stopped session container ended, from what the engine knows of it. */
import { constants } from 'node:os';
import type { SessionReason } from '../../../api/session.js';
import { RUNNER_EXIT } from '../../../runner/session-protocol.js';
import type { SandboxEnd } from '../../sessions.js';

/** A main process killed by signal N exits 128 + N. */
const KILLED = 128 + constants.signals.SIGKILL;

export interface ContainerExit {
  exitCode: number;
  oomKilled: boolean;
}

/** The reason of a session whose container stopped; undefined for a pool container never opened. */
export function sessionEnd(exit: ContainerExit): SandboxEnd | undefined {
  if (exit.oomKilled)
    return { reason: 'OOMKilled', message: 'the sandbox ran out of memory and its runner was killed' };
  const reasons: Partial<Record<number, [SessionReason, string]>> = {
    [RUNNER_EXIT.ttl]: ['TTLExpired', 'the session reached its ttlSeconds'],
    [RUNNER_EXIT.idle]: ['IdleExpired', 'the session was idle for its idleTimeoutSeconds'],
    [RUNNER_EXIT.closed]: ['Deleted', 'the session was closed'],
    [RUNNER_EXIT.stopped]: ['ContainerFailed', 'the container was stopped from outside'],
    // With no OOM: `docker kill`, or a stop whose grace period ran out.
    [KILLED]: ['ContainerFailed', 'the container was killed from outside (SIGKILL)'],
  };
  if (exit.exitCode === RUNNER_EXIT.neverOpened) return undefined;
  const known = reasons[exit.exitCode];
  if (known) return { reason: known[0], message: known[1] };
  return { reason: 'RunnerGone', message: `the session's runner ended with status ${exit.exitCode}` };
}
