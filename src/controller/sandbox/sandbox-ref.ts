/** A Sandbox as its children and Events refer to it, and the labels its children carry. */
import { LABEL_SESSION, LABEL_SESSION_UID, labelValueFor } from '../../api/v1alpha1/labels.js';
import { SANDBOX } from '../../api/v1alpha1/sandbox.js';
import type { ObjectMeta } from '../../kube/objects.js';
import { childMeta, type ObjectRef } from '../children.js';

export function sandboxRef(sandbox: { name: string; namespace: string; uid: string }): ObjectRef {
  return { apiVersion: SANDBOX.apiVersion, kind: SANDBOX.kind, ...sandbox };
}

/** What the session's NetworkPolicy selects: exactly this Sandbox's pod, by its UID. */
export const sessionPodSelector = (sandbox: ObjectRef): Record<string, string> => ({
  [LABEL_SESSION_UID]: sandbox.uid,
});

/** The metadata of the session's Pod and NetworkPolicy. */
export function sessionChildMeta(sandbox: ObjectRef): ObjectMeta {
  return childMeta(sandbox, { [LABEL_SESSION]: labelValueFor(sandbox.name), ...sessionPodSelector(sandbox) });
}
