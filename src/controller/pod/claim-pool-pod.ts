/**
 * The claim of a SandboxPool's pod (issue 16), for a SandboxRun or a Sandbox: which idle pod may
 * serve the owner (its shape label equals the owner's, it runs and is not ending, a SandboxPool
 * controls it), and the one resourceVersion-guarded PUT that binds it: `claimed`, the owner's
 * labels (its NetworkPolicy selects it), the owner as its only controller (deleting the pool leaves
 * it serving), and activeDeadlineSeconds lowered to the pod's age plus what the owner may still
 * take. Two operators (or two passes) racing for one pod: one PUT wins, the other gets Conflict,
 * reads the pod again, and tries the next pod when it is taken, so a pod never serves two owners.
 * The caller makes sure the owner's NetworkPolicy exists first. No ready pod of the shape:
 * `empty`, at once.
 */
import {
  ANNOTATION_CLAIMED_AT,
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
import type { EventRecorder } from '../events.js';
import { observePod } from './observe-pod.js';

/** The SandboxPool controlling `pod`, when one does. */
function poolOwner(pod: Pod): string | undefined {
  const ref = pod.metadata?.ownerReferences?.find((o) => o.controller === true);
  return ref && ref.kind === SANDBOX_POOL.kind && ref.apiVersion === SANDBOX_POOL.apiVersion
    ? ref.name
    : undefined;
}

/** An idle pod of a SandboxPool, ready to serve: its container runs, and it is not ending. Pure. */
export function isIdlePoolPod(pod: Pod): boolean {
  const labels = pod.metadata?.labels ?? {};
  if (labels[LABEL_POOL_POD] !== POOL_POD_IDLE || !labels[LABEL_POOL_SHAPE]) return false;
  if (poolOwner(pod) === undefined) return false;
  const view = observePod(pod);
  return view.phase === 'Running' && !view.deleting && view.ready && view.startedAt !== undefined;
}

/**
 * The idle pool pods that may serve an owner of `shape`, oldest first (the first to age out is
 * the first used). Only pods the cache shows ready: the claim's update is what decides. Pure.
 */
export function claimCandidates(pods: readonly Pod[], shape: string): Pod[] {
  return pods
    .filter((p) => p.metadata?.labels?.[LABEL_POOL_SHAPE] === shape && isIdlePoolPod(p))
    .sort((a, b) => (a.metadata?.creationTimestamp ?? '').localeCompare(b.metadata?.creationTimestamp ?? ''));
}

/** The pool whose pod this is (its owner, else its label: the pool's name as a label value). */
export const poolOfPod = (pod: Pod): string | undefined =>
  poolOwner(pod) ?? pod.metadata?.labels?.[LABEL_POOL];

/** The `ClaimedPod` Event a run or a Sandbox gets when it takes a pool's pod. */
export function recordClaimed(
  events: EventRecorder,
  owner: ObjectRef,
  pod: string,
  pool: string | undefined,
): void {
  events.normal(owner, 'ClaimedPod', `Claimed pod ${pod} of SandboxPool ${pool ?? '(unknown)'}`);
}

/**
 * The margin a claimed pod's hard end leaves past its owner's own deadline. The pod already runs, so
 * it covers the job's write and the runner's own kill and report, not a pull and a start (a cold
 * pod's startGraceSeconds). 15 s was too little under a burst of 100 runs on 2 cores: a job written
 * late let the kubelet end a print before the runner's own deadline did.
 */
export const CLAIM_GRACE_SECONDS = 30;

export interface ClaimInput {
  pod: Pod;
  owner: ObjectRef;
  /** The owner's own labels on its pod (what its NetworkPolicy and the watches select). */
  ownerLabels: Readonly<Record<string, string>>;
  /** Seconds the owner may still take from now: the pod's new hard end is its age plus these. */
  remainingSeconds: number;
  now: Date;
}

/**
 * The pod as the claim writes it (a PUT with the resourceVersion it was read at): claimed for the
 * owner, owned by it alone, stamped with the claim's time, its deadline lowered (never raised: a
 * pod's activeDeadlineSeconds may only go down). Pure.
 */
export function buildClaim(c: ClaimInput): Pod {
  const { pod } = c;
  const started = Date.parse(pod.status?.startTime ?? pod.metadata?.creationTimestamp ?? '');
  const ageSeconds = Number.isFinite(started)
    ? Math.max(0, Math.ceil((c.now.getTime() - started) / 1000))
    : 0;
  const wanted = ageSeconds + c.remainingSeconds;
  const current = pod.spec?.activeDeadlineSeconds;
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      labels: { ...pod.metadata?.labels, [LABEL_POOL_POD]: POOL_POD_CLAIMED, ...c.ownerLabels },
      annotations: { ...pod.metadata?.annotations, [ANNOTATION_CLAIMED_AT]: c.now.toISOString() },
      ownerReferences: [controllerRef(c.owner)],
    },
    spec: {
      ...pod.spec,
      containers: pod.spec?.containers ?? [],
      activeDeadlineSeconds: current === undefined ? wanted : Math.min(current, wanted),
    },
  };
}

/** A pool pod the owner has claimed (its label says so, and the owner controls it). Pure. */
export function isClaimedBy(pod: Pod, owner: Pick<ObjectRef, 'uid'>): boolean {
  return pod.metadata?.labels?.[LABEL_POOL_POD] === POOL_POD_CLAIMED && isControlledBy(pod, owner);
}

/** The pods claimed for the owner. Pure. */
export const claimedPods = (pods: readonly Pod[], owner: Pick<ObjectRef, 'uid'>): Pod[] =>
  pods.filter((p) => isClaimedBy(p, owner));

/** The pods of a namespace in the cache. */
export const podsIn = (pods: Store<Pod>, namespace: string): Pod[] =>
  pods.list().filter((p) => p.metadata?.namespace === namespace);

export interface ClaimRequest extends Omit<ClaimInput, 'pod'> {
  /** The pool shape label of the owner's effective shape (`poolShapeLabel`). */
  shapeLabel: string;
  /** Whatever else the pod must match (a session's variables). */
  fits?: (pod: Pod) => boolean;
  /** Counts each attempt's result (sandpit_pool_claims_total). */
  countClaim?: (result: ClaimResult) => void;
  /** Pods held ahead (tried first) and this operator's claims in progress (never two on one pod). */
  hold?: ClaimHold;
}

/** What a claimer holds of the pool pods: see pool-attachments.ts. */
export interface ClaimHold {
  /** The pod is ready to serve at once (attached ahead): such pods are tried first. */
  holds(uid: string): boolean;
  /** Gives the pod to this claim; false when another claim of this operator has it. */
  reserve(uid: string): boolean;
  /** The claim did not get the pod. */
  release(uid: string): void;
}

export type ClaimResult = 'warm' | 'empty' | 'conflict' | 'error';

export type ClaimOutcome =
  | { result: 'claimed'; pod: Pod; pool: string | undefined }
  | { result: 'empty' }
  /** Every ready pod was taken by someone else (Conflict, or gone) before this claim. */
  | { result: 'conflict' };

export interface ClaimDeps {
  kube: Pick<KubeClient, 'replacePod' | 'getPod'>;
  pods: Store<Pod>;
}

const uidOf = (pod: Pod): string => pod.metadata?.uid ?? '';

/** Claims the oldest fitting idle pod of the request's shape; any other error is thrown. */
export async function claimPoolPod(deps: ClaimDeps, request: ClaimRequest): Promise<ClaimOutcome> {
  const { shapeLabel, countClaim, hold, owner } = request;
  const fits = (pod: Pod) => request.fits?.(pod) ?? true;
  const claimable = (pod: Pod) => claimCandidates([pod], shapeLabel).length === 1 && fits(pod);
  const candidates = claimCandidates(podsIn(deps.pods, owner.namespace), shapeLabel).filter(fits);
  if (candidates.length === 0) {
    countClaim?.('empty');
    return { result: 'empty' };
  }
  const ordered = hold
    ? [...candidates.filter((p) => hold.holds(uidOf(p))), ...candidates.filter((p) => !hold.holds(uidOf(p)))]
    : candidates;
  for (const pod of ordered) {
    if (hold && !hold.reserve(uidOf(pod))) continue;
    let claimed: Pod | undefined;
    try {
      claimed = await bind(deps, request, pod, claimable);
    } finally {
      if (!claimed) hold?.release(uidOf(pod));
    }
    if (claimed) return { result: 'claimed', pod: claimed, pool: poolOfPod(claimed) };
  }
  return { result: 'conflict' };
}

/**
 * The PUT that claims `pod`: the pod it wrote, or undefined when another owner has it or it is
 * gone. On a Conflict it reads the pod once more and tries again if it is still idle: the cache may
 * be behind a write that left it so (the kubelet's status).
 */
async function bind(
  deps: ClaimDeps,
  request: ClaimRequest,
  pod: Pod,
  claimable: (pod: Pod) => boolean,
): Promise<Pod | undefined> {
  let current: Pod | undefined = pod;
  for (let again = false; current; again = true) {
    try {
      const claimed = await deps.kube.replacePod(
        request.owner.namespace,
        buildClaim({ ...request, pod: current }),
      );
      request.countClaim?.('warm');
      return claimed;
    } catch (e) {
      if (!isConflict(e) && !isNotFound(e)) {
        request.countClaim?.('error');
        throw e;
      }
      request.countClaim?.('conflict');
      current = isConflict(e) && !again ? await reread(deps, pod, claimable) : undefined;
    }
  }
  return undefined;
}

/** The pod as the apiserver has it now, when it is the same pod and still claimable. */
async function reread(deps: ClaimDeps, pod: Pod, claimable: (pod: Pod) => boolean): Promise<Pod | undefined> {
  const { namespace = '', name = '' } = pod.metadata ?? {};
  const fresh = await deps.kube.getPod(namespace, name).catch(() => undefined);
  return fresh && uidOf(fresh) === uidOf(pod) && claimable(fresh) ? fresh : undefined;
}
