/**
 * The children of a SandboxRun (its job's ConfigMap, the deny-all NetworkPolicy, the Pod) through
 * the shared ensureChildren(), and what the run adds to what it observed: the output tail once the
 * pod has finished.
 */
import type { RunOutput } from '../../api/v1alpha1/sandboxrun.js';
import type { Pod } from '../../kube/objects.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { ObjectRef } from '../children.js';
import { buildNetworkPolicy } from '../pod/build-network-policy.js';
import type { PodSettings } from '../pod/build-sandbox-pod.js';
import {
  ensureChildren,
  NOTHING_OBSERVED,
  observeExisting,
  type ChildrenDeps,
  type PodObservation,
} from '../pod/ensure-children.js';
import { isPodFinished } from '../pod/observe-pod.js';
import { buildConfigMap } from './build-config-map.js';
import { buildRunPod } from './build-run-pod.js';
import { readOutput, withReportedBytes, type OutputLimits } from './read-output.js';
import { runChildMeta, runPodSelector } from './run-ref.js';

export interface RunChildrenDeps extends ChildrenDeps {
  pod: PodSettings;
  output: OutputLimits;
}

export interface Observed extends PodObservation {
  output: RunOutput | undefined;
}

export const NOTHING_SEEN: Observed = { ...NOTHING_OBSERVED, output: undefined };

/** What was observed, with the output tail of a finished pod. */
async function withOutput(
  deps: RunChildrenDeps,
  run: ObjectRef,
  seen: PodObservation,
  poolPod = false,
): Promise<Observed> {
  if (!seen.pod || !isPodFinished(seen.pod)) return { ...seen, output: undefined };
  const pod = { namespace: run.namespace, name: seen.pod.name, trailer: poolPod };
  const read = await readOutput(deps.kube, pod, deps.output);
  return { ...seen, output: read && withReportedBytes(read, seen.pod.terminated?.report) };
}

export async function ensureRunChildren(
  deps: RunChildrenDeps,
  run: ObjectRef & { podRecorded: boolean },
  effective: EffectiveSpec,
  job: Buffer,
): Promise<Observed> {
  const seen = await ensureChildren(deps, run, {
    configMap: buildConfigMap(run, job),
    networkPolicy: buildNetworkPolicy(runChildMeta(run), runPodSelector(run)),
    pod: buildRunPod(run, effective, deps.pod),
    runtimeClass: effective.runtime,
  });
  return withOutput(deps, run, seen);
}

/**
 * An existing pod of the run (a cancelled run whose program may have won the race; a pool pod
 * that serves the run, `poolPod`, whose log ends with the runner's exit trailer).
 */
export async function observeRunPod(
  deps: RunChildrenDeps,
  run: ObjectRef,
  pod: Pod,
  poolPod = false,
): Promise<Observed> {
  return withOutput(deps, run, await observeExisting(deps, run, pod), poolPod);
}
