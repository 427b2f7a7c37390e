/**
 * What to do about the pod of an owner that has finished (a run cancelled, or failed before it started;
 * a session that ended): a pod still running is deleted gracefully, and a finished one too unless the
 * owner keeps it (a run's pod log holds its output; a session's pod holds only its memory-backed
 * workspace, until the pod is deleted). A deletion the kubelet has not confirmed FORCE_DELETE_AFTER_MS
 * after its grace period is forced, whoever asked for it (see unconfirmed-deletions.ts); the owner
 * waits for that.
 */
import type { Pod } from '../../kube/objects.js';
import { isControlledBy } from '../children.js';
import { isPodFinished, observePod } from './observe-pod.js';

export const FORCE_DELETE_AFTER_MS = 10_000;

export type PodStopStep =
  { action: 'none'; recheckMs?: undefined } | { action: 'delete' | 'wait'; recheckMs: number };

/**
 * For a pod being deleted, the ms until its deletion is forced (0 when due); undefined for one
 * not being deleted. deletionTimestamp is when the grace period ends, about when the delete was
 * asked for (the operator's pods have 1 s).
 */
export function forceDeletionInMs(pod: Pod, now: Date): number | undefined {
  const deleting = pod.metadata?.deletionTimestamp;
  if (!deleting) return undefined;
  return Math.max(0, new Date(deleting).getTime() + FORCE_DELETE_AFTER_MS - now.getTime());
}

export type FinishedPod = 'keep' | 'delete';

export function podStopStep(
  pod: Pod | undefined,
  ownerUid: string,
  now: Date,
  finished: FinishedPod = 'keep',
): PodStopStep {
  if (!pod?.metadata?.uid) return { action: 'none' };
  if (!isControlledBy(pod, { uid: ownerUid })) return { action: 'none' };
  const forceInMs = forceDeletionInMs(pod, now);
  if (forceInMs === undefined) {
    return finished === 'keep' && isPodFinished(observePod(pod))
      ? { action: 'none' }
      : { action: 'delete', recheckMs: FORCE_DELETE_AFTER_MS };
  }
  return { action: 'wait', recheckMs: forceInMs || FORCE_DELETE_AFTER_MS };
}
