/**
 * A RuntimeClass can exist while the node has no handler for it: the pod is scheduled, and the
 * kubelet then fails to create its sandbox again and again. The only trace is the kubelet's
 * FailedCreatePodSandBox Event on the pod (v1.20 sets no pod condition for it), whose text comes
 * from the container runtime. This names the missing handler from it.
 */
import type { KubeEvent, Pod } from '../../kube/objects.js';
import type { Blocked } from './pending.js';

export const SANDBOX_FAILED_REASON = 'FailedCreatePodSandBox';

/** The runtimes' words for "no such handler": containerd's CRI, then dockershim's. */
const NO_HANDLER = [/no runtime for "([^"]+)" is configured/, /RuntimeHandler "([^"]+)" not supported/];

/** A pod the kubelet took but has not made a sandbox for yet, in a RuntimeClass: worth asking why. */
export function awaitsSandbox(pod: Pod): boolean {
  if (!pod.spec?.runtimeClassName || !pod.spec.nodeName || pod.status?.phase !== 'Pending') return false;
  const statuses = pod.status.containerStatuses ?? [];
  return statuses.every((c) => c.state?.waiting?.reason === 'ContainerCreating' || c.state === undefined);
}

/** The field selector for the kubelet's sandbox failures on one pod. */
export const sandboxFailureSelector = (pod: Pod): string =>
  `involvedObject.uid=${pod.metadata?.uid ?? ''},reason=${SANDBOX_FAILED_REASON}`;

export function missingHandler(pod: Pod, events: readonly KubeEvent[]): Blocked | undefined {
  const runtimeClass = pod.spec?.runtimeClassName;
  for (const e of events) {
    if (e.reason !== SANDBOX_FAILED_REASON) continue;
    for (const pattern of NO_HANDLER) {
      const handler = pattern.exec(e.message ?? '')?.[1];
      if (handler === undefined) continue;
      return {
        reason: 'RuntimeClassNotFound',
        message: `node ${pod.spec?.nodeName} has no runtime handler "${handler}" for RuntimeClass "${runtimeClass}" (${e.message})`,
        permanent: false,
      };
    }
  }
  return undefined;
}
