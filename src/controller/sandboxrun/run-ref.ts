/** A SandboxRun as its children and Events refer to it, and the labels its children carry. */
import { LABEL_RUN, LABEL_RUN_UID, labelValueFor } from '../../api/v1alpha1/labels.js';
import { SANDBOX_RUN } from '../../api/v1alpha1/sandboxrun.js';
import type { ObjectMeta } from '../../kube/objects.js';
import { childMeta, type ObjectRef } from '../children.js';

export function runRef(run: { name: string; namespace: string; uid: string }): ObjectRef {
  return { apiVersion: SANDBOX_RUN.apiVersion, kind: SANDBOX_RUN.kind, ...run };
}

/** What the run's NetworkPolicy selects: exactly this run's pod, by the run's UID. */
export const runPodSelector = (run: ObjectRef): Record<string, string> => ({ [LABEL_RUN_UID]: run.uid });

/** The run's own labels on its pod (its own or a claimed pool pod). */
export const runPodLabels = (run: ObjectRef): Record<string, string> => ({
  [LABEL_RUN]: labelValueFor(run.name),
  ...runPodSelector(run),
});

/** The metadata of the run's Pod, ConfigMap and NetworkPolicy. */
export function runChildMeta(run: ObjectRef): ObjectMeta {
  return childMeta(run, runPodLabels(run));
}
