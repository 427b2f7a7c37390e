/**
 * What to do about the pod of an owner that has finished (a run cancelled, or failed before it started;
 * a session that ended): a pod still running is deleted gracefully, and a finished one too unless the
 * owner keeps it (a run's pod log holds its output; a session's pod holds only its memory-backed
 * workspace, until the pod is deleted); a deletion the kubelet has not confirmed after
 * FORCE_DELETE_AFTER_MS is forced. A busy kubelet (say, mid container creation) can take minutes
 * to confirm, and the pod object stays until it does; a cancelled sandbox must be gone promptly.
 */
import type { Pod } from '../../kube/objects.js';
import { isControlledBy } from '../children.js';
import { isPodFinished, observePod } from './observe-pod.js';

export const FORCE_DELETE_AFTER_MS = 10_000;

export type PodStopStep =
  { action: 'none'; recheckMs?: undefined } | { action: 'delete' | 'force' | 'wait'; recheckMs: number };

export type FinishedPod = 'keep' | 'delete';

export function podStopStep(
  pod: Pod | undefined,
  ownerUid: string,
  now: Date,
  finished: FinishedPod = 'keep',
): PodStopStep {
  if (!pod?.metadata?.uid) return { action: 'none' };
  if (!isControlledBy(pod, { uid: ownerUid })) return { action: 'none' };
  const deleting = pod.metadata.deletionTimestamp;
  if (!deleting) {
    return finished === 'keep' && isPodFinished(observePod(pod))
      ? { action: 'none' }
      : { action: 'delete', recheckMs: FORCE_DELETE_AFTER_MS };
  }
  // deletionTimestamp is when the grace period ends, which is about when the delete was asked for.
  const pendingMs = now.getTime() - new Date(deleting).getTime();
  if (pendingMs < FORCE_DELETE_AFTER_MS)
    return { action: 'wait', recheckMs: FORCE_DELETE_AFTER_MS - pendingMs };
  return { action: 'force', recheckMs: FORCE_DELETE_AFTER_MS };
}
