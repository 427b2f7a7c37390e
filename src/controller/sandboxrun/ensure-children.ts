/**
 * ensureChildren(): makes what an allowed run needs exist, in order (ConfigMap, deny-all
 * NetworkPolicy, then the Pod, so the pod never runs unconfined), and reports what it observed.
 * Every child is found under its deterministic name; one this run does not control is never
 * touched. Create calls are idempotent (AlreadyExists means a previous pass made it).
 */
import type { RunOutput } from '../../api/v1alpha1/sandboxrun.js';
import type { KubeClient } from '../../kube/client.js';
import { isAlreadyExists, isForbidden, KubeApiError } from '../../kube/errors.js';
import type { ConfigMap, NetworkPolicy, Pod, RuntimeClass } from '../../kube/objects.js';
import type { Store } from '../../kube/store.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import { AppError } from '../../shared/errors.js';
import { isControlledBy, type ObjectRef } from '../children.js';
import type { EventRecorder } from '../events.js';
import { buildNetworkPolicy, sameNetworkPolicySpec } from '../pod/build-network-policy.js';
import type { PodSettings } from '../pod/build-sandbox-pod.js';
import { isPodFinished, observePod, type PodView } from '../pod/observe-pod.js';
import { buildConfigMap } from './build-config-map.js';
import { buildRunPod } from './build-run-pod.js';
import type { Blocked } from './compute-status.js';
import { readOutput, withReportedBytes, type OutputLimits } from './read-output.js';
import { runChildMeta, runPodSelector } from './run-ref.js';
import { awaitsSandbox, missingHandler, sandboxFailureSelector } from './runtime-handler.js';

export interface ChildrenDeps {
  kube: KubeClient;
  pods: Store<Pod>;
  configMaps: Store<ConfigMap>;
  networkPolicies: Store<NetworkPolicy>;
  runtimeClasses: Store<RuntimeClass>;
  events: EventRecorder;
  pod: PodSettings;
  output: OutputLimits;
}

export interface Observed {
  pod: PodView | undefined;
  blocked: Blocked | undefined;
  podLost: boolean;
  output: RunOutput | undefined;
}

export const NOTHING_OBSERVED: Observed = {
  pod: undefined,
  blocked: undefined,
  podLost: false,
  output: undefined,
};

const notOurs = (kind: string, name: string): Observed => ({
  ...NOTHING_OBSERVED,
  blocked: {
    reason: 'BackendError',
    message: `${kind} ${name} exists and is not controlled by this run`,
    permanent: true,
  },
});

/** A child exists but our cache has not seen it yet: try again shortly. */
const notCachedYet = (kind: string, name: string): AppError =>
  new AppError('BACKEND_ERROR', `${kind} ${name} exists but is not in the cache yet`);

/** The observed pod, with its output once it has finished, or why its sandbox cannot be made. */
export async function observeExisting(deps: ChildrenDeps, run: ObjectRef, pod: Pod): Promise<Observed> {
  const view = observePod(pod);
  if (isPodFinished(view)) {
    const read = await readOutput(deps.kube, run.namespace, view.name, deps.output);
    const output = read && withReportedBytes(read, view.terminated?.report);
    return { ...NOTHING_OBSERVED, pod: view, output };
  }
  return { ...NOTHING_OBSERVED, pod: view, blocked: await sandboxProblem(deps.kube, run, pod) };
}

/** A RuntimeClass whose handler the node lacks, from the kubelet's Events (best effort). */
async function sandboxProblem(kube: KubeClient, run: ObjectRef, pod: Pod): Promise<Blocked | undefined> {
  if (!awaitsSandbox(pod)) return undefined;
  const events = await kube.listEvents(run.namespace, sandboxFailureSelector(pod)).catch(() => []);
  return missingHandler(pod, events);
}

export async function ensureChildren(
  deps: ChildrenDeps,
  run: ObjectRef & { podRecorded: boolean },
  effective: EffectiveSpec,
  job: Buffer,
): Promise<Observed> {
  const want = buildRunPod(run, effective, deps.pod);
  const name = want.metadata?.name ?? '';
  const cached = deps.pods.get(run.namespace, name);
  if (cached) {
    if (!isControlledBy(cached, run)) return notOurs('Pod', name);
    if (!isPodFinished(observePod(cached))) {
      const np = await ensureNetworkPolicy(deps, run);
      if (np) return np;
    }
    return observeExisting(deps, run, cached);
  }
  if (run.podRecorded) {
    // The status says we created it: a cache miss is either lag or a deleted pod; ask the apiserver.
    const live = await deps.kube.getPod(run.namespace, name);
    if (!live) return { ...NOTHING_OBSERVED, podLost: true };
    return isControlledBy(live, run) ? observeExisting(deps, run, live) : notOurs('Pod', name);
  }
  const missingClass = runtimeClassMissing(deps, effective.runtime);
  if (missingClass) return { ...NOTHING_OBSERVED, blocked: missingClass };
  const problem = (await ensureConfigMap(deps, run, job)) ?? (await ensureNetworkPolicy(deps, run));
  if (problem) return problem;
  return createPod(deps, run, want);
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
  run: ObjectRef,
  job: Buffer,
): Promise<Observed | undefined> {
  const want = buildConfigMap(run, job);
  const name = want.metadata?.name ?? '';
  const have = deps.configMaps.get(run.namespace, name);
  if (have) return isControlledBy(have, run) ? undefined : notOurs('ConfigMap', name);
  return createChild('ConfigMap', name, () => deps.kube.createConfigMap(run.namespace, want));
}

async function ensureNetworkPolicy(deps: ChildrenDeps, run: ObjectRef): Promise<Observed | undefined> {
  const want = buildNetworkPolicy(runChildMeta(run), runPodSelector(run));
  const name = want.metadata?.name ?? '';
  const have = deps.networkPolicies.get(run.namespace, name);
  if (have) {
    if (!isControlledBy(have, run)) return notOurs('NetworkPolicy', name);
    if (want.spec && !sameNetworkPolicySpec(have.spec, want.spec)) {
      await deps.kube.replaceNetworkPolicy(run.namespace, { ...have, spec: want.spec });
      await deps.events.warning(
        run,
        'NetworkPolicyRestored',
        `NetworkPolicy ${name} had been changed; restored deny-all`,
      );
    }
    return undefined;
  }
  return createChild('NetworkPolicy', name, () => deps.kube.createNetworkPolicy(run.namespace, want));
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

async function createPod(deps: ChildrenDeps, run: ObjectRef, want: Pod): Promise<Observed> {
  const name = want.metadata?.name ?? '';
  try {
    const created = await deps.kube.createPod(run.namespace, want);
    await deps.events.normal(run, 'CreatedPod', `Created pod ${name}`);
    return { ...NOTHING_OBSERVED, pod: observePod(created) };
  } catch (e) {
    if (isAlreadyExists(e)) throw notCachedYet('Pod', name);
    const refusal = e instanceof KubeApiError ? createRefusal(e) : undefined;
    if (refusal) return { ...NOTHING_OBSERVED, blocked: refusal };
    throw e;
  }
}
