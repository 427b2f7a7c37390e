/**
 * How a stopped session container ended, from what its engine knows of it (the main process's
 * exit status, the OOM killer): the Docker backend reads a container, the operator a pod.
 */
import { constants } from 'node:os';
import type { SessionReason } from '../api/session.js';
import { RUNNER_EXIT } from './session-protocol.js';

export interface SessionEnd {
  reason: SessionReason;
  message: string;
}

/** A main process killed by signal N exits 128 + N. */
const KILLED = 128 + constants.signals.SIGKILL;

export interface ContainerExit {
  exitCode: number;
  oomKilled: boolean;
}

/** The reason of a session whose container stopped; undefined for a pool container never opened. */
export function sessionEnd(exit: ContainerExit): SessionEnd | undefined {
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
