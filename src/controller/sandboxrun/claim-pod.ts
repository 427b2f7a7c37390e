/**
 * The claim of a pool pod for a SandboxRun (issue 16): which idle pod of a SandboxPool may serve
 * the run (its shape label equals the run's, it runs and is not ending, a SandboxPool controls
 * it), and the one resourceVersion-guarded update that binds it to the run: `claimed`, the run's
 * labels (its NetworkPolicy selects it), the run as its only controller (deleting the pool leaves
 * it serving), and a deadline counted from the claim. Which pods a run has claimed, and whether a
 * pod may be attached to at all. Pure.
 */
import {
  LABEL_POOL,
  LABEL_POOL_POD,
  LABEL_POOL_SHAPE,
  LABEL_RUN,
  LABEL_RUN_UID,
  labelValueFor,
  POOL_POD_CLAIMED,
  POOL_POD_IDLE,
  shapeLabelValue,
} from '../../api/v1alpha1/labels.js';
import { SANDBOX_POOL } from '../../api/v1alpha1/sandboxpool.js';
import type { Pod } from '../../kube/objects.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import { poolKey, shapeOf } from '../../policy/shape.js';
import { controllerRef, isControlledBy, type ObjectRef } from '../children.js';
import { observePod } from '../pod/observe-pod.js';

/** The shape label of the pool pods that may serve a run of this effective spec. */
export const runShapeLabel = (effective: EffectiveSpec): string =>
  shapeLabelValue(poolKey(shapeOf(effective), 'run'));

/** The SandboxPool controlling `pod`, when one does. */
function poolOwner(pod: Pod): string | undefined {
  const ref = pod.metadata?.ownerReferences?.find((o) => o.controller === true);
  return ref && ref.kind === SANDBOX_POOL.kind && ref.apiVersion === SANDBOX_POOL.apiVersion
    ? ref.name
    : undefined;
}

/** An idle pod of a SandboxPool, ready to take a job: its container runs, and it is not ending. */
export function isIdlePoolPod(pod: Pod): boolean {
  const labels = pod.metadata?.labels ?? {};
  if (labels[LABEL_POOL_POD] !== POOL_POD_IDLE || !labels[LABEL_POOL_SHAPE]) return false;
  if (poolOwner(pod) === undefined) return false;
  const view = observePod(pod);
  return view.phase === 'Running' && !view.deleting && view.ready && view.startedAt !== undefined;
}

/**
 * The idle pool pods that may serve a run of `shape`, oldest first (the first to age out is the
 * first used). Only pods the cache shows ready: the claim's update is what decides.
 */
export function claimCandidates(pods: readonly Pod[], shape: string): Pod[] {
  return pods
    .filter((p) => p.metadata?.labels?.[LABEL_POOL_SHAPE] === shape && isIdlePoolPod(p))
    .sort((a, b) => (a.metadata?.creationTimestamp ?? '').localeCompare(b.metadata?.creationTimestamp ?? ''));
}

/** The pool whose pod this is (its label: the pool's name as a label value). */
export const poolOfPod = (pod: Pod): string | undefined =>
  poolOwner(pod) ?? pod.metadata?.labels?.[LABEL_POOL];

export interface ClaimInput {
  pod: Pod;
  run: ObjectRef;
  timeoutSeconds: number;
  startGraceSeconds: number;
  now: Date;
}

/**
 * The pod as the claim writes it (a PUT with the resourceVersion it was read at): claimed for the
 * run, owned by the run alone, its deadline lowered to its age plus the run's timeout and the
 * start grace (never raised: a pod's activeDeadlineSeconds may only go down).
 */
export function buildClaim(c: ClaimInput): Pod {
  const { pod, run } = c;
  const started = Date.parse(pod.status?.startTime ?? pod.metadata?.creationTimestamp ?? '');
  const ageSeconds = Number.isFinite(started)
    ? Math.max(0, Math.ceil((c.now.getTime() - started) / 1000))
    : 0;
  const wanted = ageSeconds + c.timeoutSeconds + c.startGraceSeconds;
  const current = pod.spec?.activeDeadlineSeconds;
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      labels: {
        ...pod.metadata?.labels,
        [LABEL_POOL_POD]: POOL_POD_CLAIMED,
        [LABEL_RUN]: labelValueFor(run.name),
        [LABEL_RUN_UID]: run.uid,
      },
      ownerReferences: [controllerRef(run)],
    },
    spec: {
      ...pod.spec,
      containers: pod.spec?.containers ?? [],
      activeDeadlineSeconds: current === undefined ? wanted : Math.min(current, wanted),
    },
  };
}

/** A pool pod the run has claimed (its labels say so, and the run controls it). */
export function isClaimedBy(pod: Pod, run: Pick<ObjectRef, 'uid'>): boolean {
  const labels = pod.metadata?.labels ?? {};
  return (
    labels[LABEL_POOL_POD] === POOL_POD_CLAIMED &&
    labels[LABEL_RUN_UID] === run.uid &&
    isControlledBy(pod, run)
  );
}

/** The pods claimed for the run. */
export const claimedPods = (pods: readonly Pod[], run: Pick<ObjectRef, 'uid'>): Pod[] =>
  pods.filter((p) => isClaimedBy(p, run));
