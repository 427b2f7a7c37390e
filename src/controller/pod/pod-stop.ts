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

/**
 * How long a finished pod that is not kept stays before it is deleted (`linger`): the kubelet ends
 * a log follower cleanly while it can still find the container (it looks every 5 s); a container
 * deleted under a follower makes the v1.20 kubelet write its own error into the followed log.
 */
export const LINGER_MS = 10_000;

/** How often a lingering pod that has not finished yet is looked at again. */
const LINGER_RECHECK_MS = 1000;

/**
 * What becomes of a pod that finished by itself: kept until its owner goes, deleted, or deleted
 * LINGER_MS after it finished (a served pool pod: its log is still followed).
 */
export type FinishedPod = 'keep' | 'delete' | 'linger';

/** The ms until a lingering pod may go (0 when it may now). */
function lingerLeftMs(pod: Pod, now: Date): number {
  const view = observePod(pod);
  if (!isPodFinished(view)) return LINGER_RECHECK_MS;
  const finishedAt = view.terminated?.finishedAt;
  return finishedAt ? Math.max(0, new Date(finishedAt).getTime() + LINGER_MS - now.getTime()) : 0;
}

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
    if (finished === 'keep' && isPodFinished(observePod(pod))) return { action: 'none' };
    const lingerMs = finished === 'linger' ? lingerLeftMs(pod, now) : 0;
    return lingerMs > 0
      ? { action: 'wait', recheckMs: lingerMs }
      : { action: 'delete', recheckMs: FORCE_DELETE_AFTER_MS };
  }
  return { action: 'wait', recheckMs: forceInMs || FORCE_DELETE_AFTER_MS };
}
