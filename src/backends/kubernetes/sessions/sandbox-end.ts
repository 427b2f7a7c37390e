/**
 * How a session on Kubernetes ended, from what is known of it: the runner's own last record, and
 * the record the operator keeps in the Sandbox's status. Pure: the pod channel and the leased
 * session read the objects, and both classify through these.
 */
import { isSessionEnded } from '../../../api/session.js';
import type { SandboxEnd } from '../../sessions.js';
import type { SandboxObject } from './sandbox-checks.js';

/**
 * Whether the runner's own record is the end: it ended by its TTL, its idleness or a close. A
 * runner stopped from outside (ContainerFailed) leaves the end to the operator's record.
 */
export function runnerEndStands(own: SandboxEnd | undefined): own is SandboxEnd {
  return own !== undefined && own.reason !== 'ContainerFailed';
}

/**
 * The end a Sandbox records: none while it lives; Deleted when it is gone (deleted through another
 * replica, which audited it, or from outside by kubectl).
 */
export function recordedEnd(
  sandbox: SandboxObject | undefined,
  ref: { namespace: string; name: string },
): SandboxEnd | undefined {
  if (!sandbox)
    return {
      reason: 'Deleted',
      message: `its Sandbox ${ref.namespace}/${ref.name} is gone`,
      recordedElsewhere: true,
    };
  const phase = sandbox.status?.phase;
  if (!phase || !isSessionEnded(phase)) return undefined;
  return {
    reason: sandbox.status?.reason ?? 'RunnerGone',
    message: sandbox.status?.message ?? `it is ${phase}`,
  };
}

/** A session pod's end when the runner's record does not stand: the operator's, else the runner's report. */
export function podEnd(
  own: SandboxEnd | undefined,
  recorded: SandboxEnd | undefined,
  podName: string,
): SandboxEnd {
  return (
    recorded ??
    own ?? {
      reason: 'RunnerGone',
      message: `the attach to pod ${podName} closed while its Sandbox is still live`,
    }
  );
}
