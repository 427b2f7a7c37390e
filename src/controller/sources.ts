/**
 * What the manager watches: the objects of each kind it reconciles, and the Pods, ConfigMaps and
 * NetworkPolicies the operator made (selected by its managed-by label), in each watched namespace
 * or cluster-wide; the session Leases the gateway renews (selected by their sandpit.dev/session
 * label; the operator only reads them); and RuntimeClasses, so a run naming a missing one waits
 * instead of making a pod that can never start.
 */
import type { CustomKind } from '../api/v1alpha1/group.js';
import { LABEL_MANAGED_BY, LABEL_SESSION, MANAGED_BY_OPERATOR } from '../api/v1alpha1/labels.js';
import { collectionPath, customPrefix, type KubeClient } from '../kube/client.js';
import type { InformerSource } from '../kube/informer.js';
import type { ConfigMap, KubeObject, Lease, NetworkPolicy, Pod, RuntimeClass } from '../kube/objects.js';

export const CHILD_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY_OPERATOR}`;

export function kindSource<T extends KubeObject>(
  kube: KubeClient,
  kind: CustomKind,
  namespace: string | undefined,
): InformerSource<T> {
  return {
    resource: kind.plural,
    path: collectionPath(customPrefix(kind), kind.plural, namespace),
    list: (continueToken) => kube.listObjects<T>(kind, { namespace, continueToken }),
  };
}

export function podSource(kube: KubeClient, namespace: string | undefined): InformerSource<Pod> {
  return {
    resource: 'pods',
    path: collectionPath('/api/v1', 'pods', namespace),
    labelSelector: CHILD_SELECTOR,
    list: (continueToken) => kube.listPods({ namespace, labelSelector: CHILD_SELECTOR, continueToken }),
  };
}

export function configMapSource(kube: KubeClient, namespace: string | undefined): InformerSource<ConfigMap> {
  return {
    resource: 'configmaps',
    path: collectionPath('/api/v1', 'configmaps', namespace),
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
    path: collectionPath('/apis/networking.k8s.io/v1', 'networkpolicies', namespace),
    labelSelector: CHILD_SELECTOR,
    list: (continueToken) =>
      kube.listNetworkPolicies({ namespace, labelSelector: CHILD_SELECTOR, continueToken }),
  };
}

export function leaseSource(kube: KubeClient, namespace: string | undefined): InformerSource<Lease> {
  return {
    resource: 'leases',
    path: collectionPath('/apis/coordination.k8s.io/v1', 'leases', namespace),
    labelSelector: LABEL_SESSION,
    list: (continueToken) => kube.listLeases({ namespace, labelSelector: LABEL_SESSION, continueToken }),
  };
}

export function runtimeClassSource(kube: KubeClient): InformerSource<RuntimeClass> {
  return {
    resource: 'runtimeclasses',
    path: '/apis/node.k8s.io/v1/runtimeclasses',
    list: (continueToken) => kube.listRuntimeClasses({ namespace: undefined, continueToken }),
  };
}
