/**
 * ensureChildren(): makes what an owner's sandbox needs exist, in order (its inputs' ConfigMap if
 * it has one, the deny-all NetworkPolicy, then the Pod, so the pod never runs unconfined), and
 * reports what it observed of the pod. The namespace-wide deny-all policy is made sure of before
 * any pod is created (pod/namespace-policy.ts). Whatever kind owns them (a SandboxRun, a Sandbox), every
 * child is found under its deterministic name, and one the owner does not control is never
 * touched. Create calls are idempotent (AlreadyExists means a previous pass made it).
 */
import type { KubeClient } from '../../kube/client.js';
import { isAlreadyExists, isForbidden, KubeApiError } from '../../kube/errors.js';
import type { ConfigMap, NetworkPolicy, Pod, RuntimeClass, Secret } from '../../kube/objects.js';
import type { Store } from '../../kube/store.js';
import { AppError } from '../../shared/errors.js';
import { isControlledBy, type ObjectRef } from '../children.js';
import type { EventRecorder } from '../events.js';
import { sameNetworkPolicySpec } from './build-network-policy.js';
import {
  claimedPods,
  claimPoolPod,
  podsIn,
  poolOfPod,
  recordClaimed,
  type ClaimRequest,
} from './claim-pool-pod.js';
import { ensureNamespacePolicy, type NamespacePolicyDeps } from './namespace-policy.js';
import { isPodFinished, observePod, type PodView } from './observe-pod.js';
import type { Blocked } from './pending.js';
import { awaitsSandbox, missingHandler, sandboxFailureSelector } from './runtime-handler.js';

export interface ChildrenDeps extends NamespacePolicyDeps {
  kube: KubeClient;
  pods: Store<Pod>;
  configMaps: Store<ConfigMap>;
  networkPolicies: Store<NetworkPolicy>;
  runtimeClasses: Store<RuntimeClass>;
  events: EventRecorder;
}

/** The children an owner wants, as the builders made them. */
export interface WantedChildren {
  pod: Pod;
  networkPolicy: NetworkPolicy;
  configMap?: ConfigMap | undefined;
  /** A sandbox with egress: its proxy URL, credential included, for the pod's environment. */
  secret?: Secret | undefined;
  /** The pod's RuntimeClass: while it does not exist, no pod is made. */
  runtimeClass: string | undefined;
  /** A SandboxPool's ready pod may serve the owner instead of `pod`: tried before `pod` is created. */
  claim?: ClaimRequest | undefined;
}

export interface PodObservation {
  pod: PodView | undefined;
  blocked: Blocked | undefined;
  /** The pod was created once and is gone now. */
  podLost: boolean;
  /** The SandboxPool whose pod this pass claimed for the owner, when it claimed one. */
  claimedFrom?: string | undefined;
}

export const NOTHING_OBSERVED: PodObservation = { pod: undefined, blocked: undefined, podLost: false };

const notOurs = (owner: ObjectRef, kind: string, name: string): PodObservation => ({
  ...NOTHING_OBSERVED,
  blocked: {
    reason: 'BackendError',
    message: `${kind} ${name} exists and is not controlled by this ${owner.kind}`,
    permanent: true,
  },
});

/** A child exists but our cache has not seen it yet: try again shortly. */
const notCachedYet = (kind: string, name: string): AppError =>
  new AppError('BACKEND_ERROR', `${kind} ${name} exists but is not in the cache yet`);

/** The observed pod, or why its sandbox cannot be made while it is not finished. */
export async function observeExisting(
  deps: Pick<ChildrenDeps, 'kube'>,
  owner: ObjectRef,
  pod: Pod,
): Promise<PodObservation> {
  const view = observePod(pod);
  if (isPodFinished(view)) return { ...NOTHING_OBSERVED, pod: view };
  return { ...NOTHING_OBSERVED, pod: view, blocked: await sandboxProblem(deps.kube, owner, pod) };
}

/** A RuntimeClass whose handler the node lacks, from the kubelet's Events (best effort). */
async function sandboxProblem(kube: KubeClient, owner: ObjectRef, pod: Pod): Promise<Blocked | undefined> {
  if (!awaitsSandbox(pod)) return undefined;
  const events = await kube.listEvents(owner.namespace, sandboxFailureSelector(pod)).catch(() => []);
  return missingHandler(pod, events);
}

export async function ensureChildren(
  deps: ChildrenDeps,
  owner: ObjectRef & { podRecorded: boolean; recordedPod?: string | undefined },
  want: WantedChildren,
): Promise<PodObservation> {
  // A claimed pool pod has the pool's name for it, which only the status records.
  const name = owner.recordedPod ?? want.pod.metadata?.name ?? '';
  const cached = deps.pods.get(owner.namespace, name);
  if (cached) {
    if (!isControlledBy(cached, owner)) return notOurs(owner, 'Pod', name);
    if (!isPodFinished(observePod(cached))) {
      const np = await ensureNetworkPolicy(deps, owner, want.networkPolicy);
      if (np) return np;
    }
    return observeExisting(deps, owner, cached);
  }
  if (owner.podRecorded) {
    // The status says we created it: a cache miss is either lag or a deleted pod; ask the apiserver.
    const live = await deps.kube.getPod(owner.namespace, name);
    if (!live) return { ...NOTHING_OBSERVED, podLost: true };
    return isControlledBy(live, owner) ? observeExisting(deps, owner, live) : notOurs(owner, 'Pod', name);
  }
  return makePod(deps, owner, want);
}

/** A pod for an owner that has none: a pool's, claimed, or a new one, after its ConfigMap and NetworkPolicy. */
async function makePod(deps: ChildrenDeps, owner: ObjectRef, want: WantedChildren): Promise<PodObservation> {
  if (want.claim) {
    // A pass that claimed a pod and then failed to record it in the status: the pod is the owner's.
    const [earlier] = claimedPods(podsIn(deps.pods, owner.namespace), owner);
    if (earlier) return { ...(await observeExisting(deps, owner, earlier)), claimedFrom: poolOfPod(earlier) };
  }
  const missingClass = runtimeClassMissing(deps, want.runtimeClass);
  if (missingClass) return { ...NOTHING_OBSERVED, blocked: missingClass };
  const problem =
    (want.configMap ? await ensureConfigMap(deps, owner, want.configMap) : undefined) ??
    (want.secret ? await ensureSecret(deps, owner, want.secret) : undefined) ??
    (await ensureNetworkPolicy(deps, owner, want.networkPolicy));
  if (problem) return problem;
  if (want.claim) {
    const claim = await claimPoolPod(deps, want.claim);
    if (claim.result === 'claimed') {
      recordClaimed(deps.events, owner, claim.pod.metadata?.name ?? '', claim.pool);
      return { ...NOTHING_OBSERVED, pod: observePod(claim.pod), claimedFrom: claim.pool };
    }
  }
  await ensureNamespacePolicy(deps, owner.namespace);
  return createPod(deps, owner, want.pod);
}

function runtimeClassMissing(deps: ChildrenDeps, runtime: string | undefined): Blocked | undefined {
  const classes = deps.runtimeClasses;
  if (!runtime || !classes.hasSynced() || classes.get('', runtime)) return undefined;
  return {
    reason: 'RuntimeClassNotFound',
    message: `RuntimeClass "${runtime}" does not exist in the cluster`,
    permanent: false,
  };
}

async function ensureConfigMap(
  deps: ChildrenDeps,
  owner: ObjectRef,
  want: ConfigMap,
): Promise<PodObservation | undefined> {
  const name = want.metadata?.name ?? '';
  const have = deps.configMaps.get(owner.namespace, name);
  if (have) return isControlledBy(have, owner) ? undefined : notOurs(owner, 'ConfigMap', name);
  return createChild('ConfigMap', name, () => deps.kube.createConfigMap(owner.namespace, want));
}

/** The sandbox's Secret: made, or found made by an earlier pass (never one it does not control). */
async function ensureSecret(
  deps: ChildrenDeps,
  owner: ObjectRef,
  want: Secret,
): Promise<PodObservation | undefined> {
  const name = want.metadata?.name ?? '';
  try {
    await deps.kube.createSecret(owner.namespace, want);
    return undefined;
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
  }
  const have = await deps.kube.getSecret(owner.namespace, name);
  if (!have) throw notCachedYet('Secret', name);
  return isControlledBy(have, owner) ? undefined : notOurs(owner, 'Secret', name);
}

export async function ensureNetworkPolicy(
  deps: ChildrenDeps,
  owner: ObjectRef,
  want: NetworkPolicy,
): Promise<PodObservation | undefined> {
  const name = want.metadata?.name ?? '';
  const have = deps.networkPolicies.get(owner.namespace, name);
  if (have) {
    if (!isControlledBy(have, owner)) return notOurs(owner, 'NetworkPolicy', name);
    if (want.spec && !sameNetworkPolicySpec(have.spec, want.spec)) {
      await deps.kube.replaceNetworkPolicy(owner.namespace, { ...have, spec: want.spec });
      deps.events.warning(
        owner,
        'NetworkPolicyRestored',
        `NetworkPolicy ${name} had been changed; restored its rules`,
      );
    }
    return undefined;
  }
  return createChild('NetworkPolicy', name, () => deps.kube.createNetworkPolicy(owner.namespace, want));
}

/** Creates a child; AlreadyExists means a previous pass made it and the cache has not caught up. */
async function createChild(kind: string, name: string, create: () => Promise<unknown>): Promise<undefined> {
  try {
    await create();
    return undefined;
  } catch (e) {
    if (isAlreadyExists(e)) throw notCachedYet(kind, name);
    throw e;
  }
}

/** Why the apiserver refused the pod, when waiting (or nothing) can be done about it. */
export function createRefusal(e: KubeApiError): Blocked | undefined {
  const text = e.message;
  if (isForbidden(e) && /exceeded quota/i.test(text))
    return { reason: 'QuotaExceeded', message: text, permanent: false };
  if (/RuntimeClass/.test(text) && (isForbidden(e) || e.status === 400 || e.status === 422)) {
    return { reason: 'RuntimeClassNotFound', message: text, permanent: false };
  }
  if (e.status === 400 || e.status === 422) return { reason: 'BackendError', message: text, permanent: true };
  return undefined;
}

async function createPod(deps: ChildrenDeps, owner: ObjectRef, want: Pod): Promise<PodObservation> {
  const name = want.metadata?.name ?? '';
  try {
    const created = await deps.kube.createPod(owner.namespace, want);
    deps.events.normal(owner, 'CreatedPod', `Created pod ${name}`);
    return { ...NOTHING_OBSERVED, pod: observePod(created) };
  } catch (e) {
    if (isAlreadyExists(e)) throw notCachedYet('Pod', name);
    const refusal = e instanceof KubeApiError ? createRefusal(e) : undefined;
    if (refusal) return { ...NOTHING_OBSERVED, blocked: refusal };
    throw e;
  }
}
