/**
 * planPool(): what one pass does to a pool's pods, from the pods it knows of (the cache, corrected
 * by the writes the informer has not shown yet). Pure: time comes in as an argument.
 * - A pod the pool controls and labels idle is ready (Running, Ready, not terminating) or
 *   starting; it is replaced when it ended, has been idle longer than maxIdleSeconds, or was made
 *   for another shape (the spec or the policy changed).
 * - A pod claimed from the pool (labelled claimed, or no longer controlled by it) is counted as
 *   claimed while it exists, and never touched: its run or session owns it.
 * - Then the pool keeps exactly `replicas` unclaimed pods: it creates the missing ones and deletes
 *   the surplus, starting ones before ready ones, newest first.
 * - A claimed pod is replaced REFILL_DELAY_MS after its claim, or once it ends if sooner: a pod
 *   started at once would share the node's CPU with the short run its claim serves.
 */
import {
  ANNOTATION_CLAIMED_AT,
  LABEL_POOL_POD,
  LABEL_POOL_SHAPE,
  POOL_POD_IDLE,
} from '../../api/v1alpha1/labels.js';
import type { Pod } from '../../kube/objects.js';
import { isControlledBy } from '../children.js';
import { isPodFinished, observePod } from '../pod/observe-pod.js';

export type ReplaceReason = 'Ended' | 'Expired' | 'ShapeChanged' | 'ScaledDown';

/** How long a claimed pod's replacement waits for the run it serves to end. */
export const REFILL_DELAY_MS = 1000;

export interface PoolPodsInput {
  pods: readonly Pod[];
  poolUid: string;
  /** The shape label pods must have; undefined when the pool may have none (denied). */
  shapeLabel: string | undefined;
  replicas: number;
  maxIdleSeconds: number;
  now: string;
}

export interface PoolPlan {
  ready: Pod[];
  starting: Pod[];
  claimed: number;
  /** Idle pods to delete, each with why. */
  remove: { pod: Pod; reason: ReplaceReason }[];
  /** Pods to create. */
  create: number;
  /** ms until the first claimed pod's replacement is due (undefined: none is held back). */
  nextRefillMs: number | undefined;
  /** ms until the oldest kept pod reaches maxIdleSeconds (undefined: no pod kept). */
  nextExpiryMs: number | undefined;
}

const createdMs = (pod: Pod): number => Date.parse(pod.metadata?.creationTimestamp ?? '') || 0;

/** Newest first. */
const byNewest = (a: Pod, b: Pod): number => createdMs(b) - createdMs(a);

export const isIdlePodOf = (pod: Pod, poolUid: string): boolean =>
  pod.metadata?.labels?.[LABEL_POOL_POD] === POOL_POD_IDLE && isControlledBy(pod, { uid: poolUid });

/** Why an idle pod must go, if it must. */
function replaceReason(pod: Pod, i: PoolPodsInput): ReplaceReason | undefined {
  if (isPodFinished(observePod(pod))) return 'Ended';
  if (i.shapeLabel === undefined || pod.metadata?.labels?.[LABEL_POOL_SHAPE] !== i.shapeLabel)
    return 'ShapeChanged';
  const created = createdMs(pod);
  if (created && Date.parse(i.now) - created >= i.maxIdleSeconds * 1000) return 'Expired';
  return undefined;
}

export function isPoolPodReady(pod: Pod): boolean {
  const view = observePod(pod);
  return view.phase === 'Running' && view.ready && !view.deleting;
}

/** ms until a claimed pod's replacement is due (0: now), from its claim's time. */
function refillDueMs(pod: Pod, nowMs: number): number {
  const view = observePod(pod);
  if (view.deleting || isPodFinished(view)) return 0;
  const claimedAt = Date.parse(pod.metadata?.annotations?.[ANNOTATION_CLAIMED_AT] ?? '');
  return Number.isFinite(claimedAt) ? Math.max(0, claimedAt + REFILL_DELAY_MS - nowMs) : 0;
}

export function planPool(i: PoolPodsInput): PoolPlan {
  const remove: PoolPlan['remove'] = [];
  const kept: Pod[] = [];
  const nowMs = Date.parse(i.now);
  let claimed = 0;
  const holding: number[] = [];
  for (const pod of i.pods) {
    if (!isIdlePodOf(pod, i.poolUid)) {
      claimed += 1;
      const due = refillDueMs(pod, nowMs);
      if (due > 0) holding.push(due);
      continue;
    }
    if (pod.metadata?.deletionTimestamp) continue; // going: neither counted nor deleted again
    const reason = replaceReason(pod, i);
    if (reason) remove.push({ pod, reason });
    else kept.push(pod);
  }
  const ready = kept.filter(isPoolPodReady).sort(byNewest);
  const starting = kept.filter((p) => !isPoolPodReady(p)).sort(byNewest);
  const surplus = Math.max(0, kept.length - i.replicas);
  const scaledDown = [...starting, ...ready].slice(0, surplus);
  for (const pod of scaledDown) remove.push({ pod, reason: 'ScaledDown' });
  const staying = (p: Pod): boolean => !scaledDown.includes(p);
  const remaining = kept.filter(staying);
  const oldest = Math.min(...remaining.map(createdMs).filter((t) => t > 0));
  return {
    ready: ready.filter(staying),
    starting: starting.filter(staying),
    claimed,
    remove,
    create: Math.max(0, i.replicas - kept.length - holding.length),
    nextRefillMs: holding.length ? Math.min(...holding) : undefined,
    nextExpiryMs: Number.isFinite(oldest) ? Math.max(0, oldest + i.maxIdleSeconds * 1000 - nowMs) : undefined,
  };
}
