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
import { egressRules, egressSecretOf, type ClusterEgress } from '../pod/egress.js';
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
import type { ReturnedOutputs } from '../../runner/output-files.js';
import {
  readOutput,
  readOutputAndFiles,
  withReportedBytes,
  type FilesRead,
  type OutputLimits,
} from './read-output.js';
import { runChildMeta, runPodSelector } from './run-ref.js';

export interface RunChildrenDeps extends ChildrenDeps {
  pod: PodSettings;
  output: OutputLimits;
  /** The egress proxy, when the cluster runs one (a run with an allowlist is admitted only then). */
  egress?: ClusterEgress | undefined;
}

/** The run's NetworkPolicy: deny-all, or (with an allowlist) egress to the proxy and its CIDR entries. */
export function runNetworkPolicy(
  deps: Pick<RunChildrenDeps, 'egress'>,
  run: ObjectRef,
  effective: EffectiveSpec,
) {
  return buildNetworkPolicy(
    runChildMeta(run),
    runPodSelector(run),
    egressRules(effective.network, deps.egress),
  );
}

export interface Observed extends PodObservation {
  output: RunOutput | undefined;
  /** The files at the end of a finished pod's log, when the run asked for some and they were there. */
  files?: ReturnedOutputs | undefined;
}

/** What a run that asked for output files needs to read them (none: it asked for none). */
export function filesReadOf(spec: EffectiveSpec): FilesRead | undefined {
  if (spec.outputs.entries.length === 0) return undefined;
  return { caps: spec.outputs.caps, outputBytes: spec.limits.outputBytes };
}

/** How a pod's log is read: a pool pod's ends with the runner's trailer; a run with outputs has its files. */
export interface LogShape {
  poolPod?: boolean;
  files?: FilesRead | undefined;
}

export const NOTHING_SEEN: Observed = { ...NOTHING_OBSERVED, output: undefined };

/** What was observed, with the output tail (and the files) of a finished pod. */
async function withOutput(
  deps: RunChildrenDeps,
  run: ObjectRef,
  seen: PodObservation,
  shape: LogShape = {},
): Promise<Observed> {
  if (!seen.pod || !isPodFinished(seen.pod)) return { ...seen, output: undefined };
  const pod = { namespace: run.namespace, name: seen.pod.name, trailer: shape.poolPod === true };
  const report = seen.pod.terminated?.report;
  if (shape.files) {
    const read = await readOutputAndFiles(deps.kube, pod, deps.output, shape.files);
    return { ...seen, output: read && withReportedBytes(read.output, report), files: read?.files };
  }
  const read = await readOutput(deps.kube, pod, deps.output);
  return { ...seen, output: read && withReportedBytes(read, report) };
}

export async function ensureRunChildren(
  deps: RunChildrenDeps,
  run: ObjectRef & { podRecorded: boolean },
  effective: EffectiveSpec,
  job: Buffer,
): Promise<Observed> {
  const seen = await ensureChildren(deps, run, {
    configMap: buildConfigMap(run, job),
    secret: egressSecretOf(runChildMeta(run), effective.network, {
      cluster: deps.egress,
      id: { kind: 'run', uid: run.uid },
    }),
    networkPolicy: runNetworkPolicy(deps, run, effective),
    pod: buildRunPod(run, effective, deps.pod),
    runtimeClass: effective.runtime,
  });
  return withOutput(deps, run, seen, { files: filesReadOf(effective) });
}

/**
 * An existing pod of the run (a cancelled run whose program may have won the race; a pool pod
 * that serves the run, `poolPod`, whose log ends with the runner's exit trailer).
 */
export async function observeRunPod(
  deps: RunChildrenDeps,
  run: ObjectRef,
  pod: Pod,
  shape: LogShape = {},
): Promise<Observed> {
  return withOutput(deps, run, await observeExisting(deps, run, pod), shape);
}
