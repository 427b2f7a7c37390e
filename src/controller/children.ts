/**
 * What a run's children share: the deterministic name, the system labels and the controller
 * owner reference (so deleting the run garbage-collects them), and the ownership check the
 * reconciler applies before it touches anything it finds under that name.
 */
import type { ObjectMeta, OwnerReference } from '../kube/objects.js';
import { SANDBOX_RUN } from '../api/v1alpha1/sandboxrun.js';
import {
  childName,
  LABEL_COMPONENT,
  LABEL_MANAGED_BY,
  LABEL_RUN,
  LABEL_RUN_UID,
  labelValueFor,
  MANAGED_BY_OPERATOR,
} from '../api/v1alpha1/labels.js';
import type { KubeObject } from '../kube/objects.js';

/** The identity of a run, as its children refer to it. */
export interface RunRef {
  name: string;
  namespace: string;
  uid: string;
}

export function controllerRef(run: RunRef): OwnerReference {
  return {
    apiVersion: SANDBOX_RUN.apiVersion,
    kind: SANDBOX_RUN.kind,
    name: run.name,
    uid: run.uid,
    controller: true,
  };
}

/** System labels only; they are what the NetworkPolicy and the operator's watches select on. */
export function childLabels(run: RunRef): Record<string, string> {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY_OPERATOR,
    [LABEL_COMPONENT]: 'sandbox',
    [LABEL_RUN]: labelValueFor(run.name),
    [LABEL_RUN_UID]: run.uid,
  };
}

export function childMeta(run: RunRef): ObjectMeta {
  return {
    name: childName(run.name, run.uid),
    namespace: run.namespace,
    labels: childLabels(run),
    ownerReferences: [controllerRef(run)],
  };
}

/** True when `obj` names this run (by UID) as its controller. */
export function isControlledBy(obj: KubeObject, run: RunRef): boolean {
  return (obj.metadata?.ownerReferences ?? []).some((o) => o.controller === true && o.uid === run.uid);
}

/** The `namespace/name` of the SandboxRun controlling `obj`, if any. */
export function ownerKey(obj: KubeObject): string | undefined {
  const ref = (obj.metadata?.ownerReferences ?? []).find(
    (o) => o.controller === true && o.kind === SANDBOX_RUN.kind && o.apiVersion === SANDBOX_RUN.apiVersion,
  );
  return ref && obj.metadata?.namespace ? `${obj.metadata.namespace}/${ref.name}` : undefined;
}
