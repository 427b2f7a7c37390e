/**
 * What every child the operator makes shares, whatever kind owns it: the deterministic name, the
 * system labels, the controller owner reference (so deleting the owner garbage-collects it), the
 * ownership check a reconciler applies before it touches anything under that name, and the owner
 * an event about a child is routed to.
 */
import { childName, LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY_OPERATOR } from '../api/v1alpha1/labels.js';
import type { KubeObject, ObjectMeta, OwnerReference } from '../kube/objects.js';

/** An object that owns children (a SandboxRun), as they refer to it. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid: string;
}

export function controllerRef(owner: ObjectRef): OwnerReference {
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name: owner.name,
    uid: owner.uid,
    controller: true,
  };
}

/**
 * A child's metadata: its name, the operator's system labels and the owner's `labels` (what its
 * NetworkPolicy and the operator's watches select on), and the controller reference.
 */
export function childMeta(owner: ObjectRef, labels: Readonly<Record<string, string>>): ObjectMeta {
  return {
    name: childName(owner.name, owner.uid),
    namespace: owner.namespace,
    labels: { [LABEL_MANAGED_BY]: MANAGED_BY_OPERATOR, [LABEL_COMPONENT]: 'sandbox', ...labels },
    ownerReferences: [controllerRef(owner)],
  };
}

/** True when `obj` names this owner (by UID) as its controller. */
export function isControlledBy(obj: KubeObject, owner: Pick<ObjectRef, 'uid'>): boolean {
  return (obj.metadata?.ownerReferences ?? []).some((o) => o.controller === true && o.uid === owner.uid);
}

/** An owner as the manager routes to it: its apiVersion and kind, and its `namespace/name` key. */
export interface OwnerKey {
  apiVersion: string;
  kind: string;
  key: string;
}

/** Every owner of `obj` (owners are in the object's own namespace). */
export function ownersOf(obj: KubeObject, controllerOnly = false): OwnerKey[] {
  const namespace = obj.metadata?.namespace;
  if (!namespace) return [];
  return (obj.metadata?.ownerReferences ?? [])
    .filter((o) => !controllerOnly || o.controller === true)
    .map((o) => ({ apiVersion: o.apiVersion, kind: o.kind, key: `${namespace}/${o.name}` }));
}

/** The object controlling `obj`. */
export function controllerOf(obj: KubeObject): OwnerKey | undefined {
  return ownersOf(obj, true)[0];
}
