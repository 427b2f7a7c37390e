/**
 * What the controller watches: SandboxRuns, and the Pods, ConfigMaps and NetworkPolicies it made
 * (selected by its managed-by label), in each watched namespace or cluster-wide; and RuntimeClasses,
 * so a run naming a missing one waits instead of making a pod that can never start.
 */
import type { ConfigMap, NetworkPolicy, Pod, RuntimeClass } from '../kube/objects.js';
import { LABEL_MANAGED_BY, MANAGED_BY_OPERATOR } from '../api/v1alpha1/labels.js';
import { SANDBOX_RUN, type SandboxRun } from '../api/v1alpha1/sandboxrun.js';
import type { KubeClient } from '../kube/client.js';
import type { InformerSource } from '../kube/informer.js';

export const CHILD_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY_OPERATOR}`;

const scoped = (namespace: string | undefined, group: string, plural: string): string =>
  `${group}${namespace ? `/namespaces/${namespace}` : ''}/${plural}`;

export function runSource(kube: KubeClient, namespace: string | undefined): InformerSource<SandboxRun> {
  return {
    resource: SANDBOX_RUN.plural,
    path: scoped(namespace, `/apis/${SANDBOX_RUN.apiVersion}`, SANDBOX_RUN.plural),
    list: (continueToken) => kube.listObjects<SandboxRun>(SANDBOX_RUN, { namespace, continueToken }),
  };
}

export function podSource(kube: KubeClient, namespace: string | undefined): InformerSource<Pod> {
  return {
    resource: 'pods',
    path: scoped(namespace, '/api/v1', 'pods'),
    labelSelector: CHILD_SELECTOR,
    list: (continueToken) => kube.listPods({ namespace, labelSelector: CHILD_SELECTOR, continueToken }),
  };
}

export function configMapSource(kube: KubeClient, namespace: string | undefined): InformerSource<ConfigMap> {
  return {
    resource: 'configmaps',
    path: scoped(namespace, '/api/v1', 'configmaps'),
    labelSelector: CHILD_SELECTOR,
    list: (continueToken) => kube.listConfigMaps({ namespace, labelSelector: CHILD_SELECTOR, continueToken }),
  };
}

export function networkPolicySource(
  kube: KubeClient,
  namespace: string | undefined,
): InformerSource<NetworkPolicy> {
  return {
    resource: 'networkpolicies',
    path: scoped(namespace, '/apis/networking.k8s.io/v1', 'networkpolicies'),
    labelSelector: CHILD_SELECTOR,
    list: (continueToken) =>
      kube.listNetworkPolicies({ namespace, labelSelector: CHILD_SELECTOR, continueToken }),
  };
}

export function runtimeClassSource(kube: KubeClient): InformerSource<RuntimeClass> {
  return {
    resource: 'runtimeclasses',
    path: '/apis/node.k8s.io/v1/runtimeclasses',
    list: (continueToken) => kube.listRuntimeClasses({ namespace: undefined, continueToken }),
  };
}
