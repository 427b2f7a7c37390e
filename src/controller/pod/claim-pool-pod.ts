/**
 * claimPoolPod(): gives one idle, ready pod of a SandboxPool to one owner (a SandboxRun or a
 * Sandbox) whose shape is the pod's. The claim is one PUT guarded by the pod's resourceVersion that
 * changes, together, the pool state label to `claimed`, adds the owner's labels (what its own
 * NetworkPolicy selects), makes the owner the pod's only controller (the pool no longer owns it, so
 * deleting the pool leaves it serving), and lowers activeDeadlineSeconds to the pod's age plus what
 * the owner may still take. Two operators (or two passes) racing for one pod: one PUT wins, the
 * other gets Conflict and tries the next pod, so a pod never serves two owners. The caller makes
 * sure the owner's NetworkPolicy exists first. No ready pod of the shape: undefined, at once.
 */
import {
  LABEL_POOL,
  LABEL_POOL_POD,
  LABEL_POOL_SHAPE,
  POOL_POD_CLAIMED,
  POOL_POD_IDLE,
} from '../../api/v1alpha1/labels.js';
import { SANDBOX_POOL } from '../../api/v1alpha1/sandboxpool.js';
import type { KubeClient } from '../../kube/client.js';
import { isConflict, isNotFound } from '../../kube/errors.js';
import type { Pod } from '../../kube/objects.js';
import type { Store } from '../../kube/store.js';
import { controllerRef, isControlledBy, type ObjectRef } from '../children.js';
import { observePod } from './observe-pod.js';

export interface ClaimRequest {
  owner: ObjectRef;
  /** The owner's own labels on its pod (what its NetworkPolicy and the watches select). */
  ownerLabels: Readonly<Record<string, string>>;
  /** The pool shape label the owner's effective shape has (`shapeLabelValue(poolKey(...))`). */
  shapeLabel: string;
  /** Seconds the owner may still take from now: the pod's new hard end is its age plus these. */
  remainingSeconds: number;
  /** Whatever else the pod must match (a session's variables). */
  fits?: (pod: Pod) => boolean;
  now: Date;
}

/** The pool's pods an owner of `shapeLabel` may claim, oldest first (they age out first). Pure. */
export function claimCandidates(pods: readonly Pod[], namespace: string, shapeLabel: string): Pod[] {
  return pods
    .filter((pod) => {
      const m = pod.metadata;
      if (m?.namespace !== namespace || m.deletionTimestamp) return false;
      if (m.labels?.[LABEL_POOL_POD] !== POOL_POD_IDLE || m.labels[LABEL_POOL_SHAPE] !== shapeLabel)
        return false;
      if (!(m.ownerReferences ?? []).some((o) => o.controller === true && o.kind === SANDBOX_POOL.kind))
        return false;
      const view = observePod(pod);
      return view.phase === 'Running' && view.ready && !view.terminated;
    })
    .sort((a, b) => (a.metadata?.creationTimestamp ?? '').localeCompare(b.metadata?.creationTimestamp ?? ''));
}

/** The pod's age in whole seconds as activeDeadlineSeconds counts it (from status.startTime). */
function podAgeSeconds(pod: Pod, now: Date): number {
  const started = Date.parse(pod.status?.startTime ?? pod.metadata?.creationTimestamp ?? '');
  return Number.isFinite(started) ? Math.max(0, Math.ceil((now.getTime() - started) / 1000)) : 0;
}

/** The claimed pod, as the PUT writes it. Pure. */
export function claimedPod(pod: Pod, request: ClaimRequest): Pod {
  const current = pod.spec?.activeDeadlineSeconds;
  const wanted = podAgeSeconds(pod, request.now) + request.remainingSeconds;
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      labels: { ...pod.metadata?.labels, [LABEL_POOL_POD]: POOL_POD_CLAIMED, ...request.ownerLabels },
      ownerReferences: [controllerRef(request.owner)],
    },
    spec: {
      ...pod.spec!,
      // It may only be lowered on a running pod.
      activeDeadlineSeconds: current === undefined ? wanted : Math.min(current, wanted),
    },
  };
}

/** The pool a pool pod came from (its label: the pool's name unless that was too long for one). */
export const poolOf = (pod: Pod): string => pod.metadata?.labels?.[LABEL_POOL] ?? '';

/** A pod claimed for `owner` before, in the cache. */
export function claimedFor(pods: Store<Pod>, owner: ObjectRef): Pod | undefined {
  return pods
    .list()
    .find(
      (pod) =>
        pod.metadata?.namespace === owner.namespace &&
        pod.metadata.labels?.[LABEL_POOL_POD] === POOL_POD_CLAIMED &&
        isControlledBy(pod, owner),
    );
}

export type ClaimOutcome =
  | { result: 'claimed'; pod: Pod; pool: string }
  | { result: 'empty' }
  /** Every ready pod was taken by someone else (Conflict or gone) before this claim. */
  | { result: 'conflict' };

export async function claimPoolPod(
  deps: { kube: KubeClient; pods: Store<Pod> },
  request: ClaimRequest,
): Promise<ClaimOutcome> {
  const { namespace } = request.owner;
  const candidates = claimCandidates(deps.pods.list(), namespace, request.shapeLabel).filter(
    (pod) => request.fits?.(pod) ?? true,
  );
  if (candidates.length === 0) return { result: 'empty' };
  for (const pod of candidates) {
    const pool = pod.metadata?.ownerReferences?.find((o) => o.controller === true)?.name ?? poolOf(pod);
    try {
      const claimed = await deps.kube.replacePod(namespace, claimedPod(pod, request));
      return { result: 'claimed', pod: claimed, pool };
    } catch (e) {
      if (isConflict(e) || isNotFound(e)) continue;
      throw e;
    }
  }
  return { result: 'conflict' };
}
