/**
 * The namespace-wide deny-all NetworkPolicy (`sandpit-deny-all`): it selects every pod the operator
 * makes (by LABEL_MANAGED_BY), ingress and egress, with no rules, so a pod whose labels change (a
 * pool pod claimed by a run) is never selected by no policy at all. Per-run and per-session
 * policies only add to it. The operator makes sure it exists in a namespace before it creates any
 * sandbox pod there, and restores it when the NetworkPolicy informer shows it changed or gone.
 * It has no owner: it outlives any one run or pool, and denies only what sandpit made.
 */
import {
  LABEL_MANAGED_BY,
  MANAGED_BY_OPERATOR,
  NAMESPACE_DENY_ALL_POLICY,
} from '../../api/v1alpha1/labels.js';
import type { KubeClient } from '../../kube/client.js';
import { isAlreadyExists } from '../../kube/errors.js';
import type { NetworkPolicy } from '../../kube/objects.js';
import type { Store } from '../../kube/store.js';
import type { Logger } from '../../observability/logger.js';
import { buildNetworkPolicy, sameNetworkPolicySpec } from './build-network-policy.js';

/** The policy in `namespace`, as the operator wants it. Pure. */
export function buildNamespacePolicy(namespace: string): NetworkPolicy {
  return buildNetworkPolicy(
    {
      name: NAMESPACE_DENY_ALL_POLICY,
      namespace,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY_OPERATOR, 'sandpit.dev/component': 'network-policy' },
    },
    { [LABEL_MANAGED_BY]: MANAGED_BY_OPERATOR },
  );
}

/** Whether `have` is the policy as wanted: its rules, and the label the operator's informer selects on. */
export function isNamespacePolicyIntact(have: NetworkPolicy, want: NetworkPolicy): boolean {
  const labels = want.metadata?.labels ?? {};
  const kept = Object.entries(labels).every(([k, v]) => have.metadata?.labels?.[k] === v);
  return kept && want.spec !== undefined && sameNetworkPolicySpec(have.spec, want.spec);
}

/** The namespaces whose policy this process made sure of (until the informer shows it changed). */
export class NamespacePolicies {
  private readonly ensured = new Set<string>();
  has(namespace: string): boolean {
    return this.ensured.has(namespace);
  }
  mark(namespace: string): void {
    this.ensured.add(namespace);
  }
  forget(namespace: string): void {
    this.ensured.delete(namespace);
  }
}

export interface NamespacePolicyDeps {
  kube: KubeClient;
  networkPolicies: Store<NetworkPolicy>;
  namespacePolicies: NamespacePolicies;
  logger: Logger;
}

/** Makes sure the namespace's deny-all policy exists and is intact (a write only when it is not). */
export async function ensureNamespacePolicy(deps: NamespacePolicyDeps, namespace: string): Promise<void> {
  if (deps.namespacePolicies.has(namespace)) return;
  const want = buildNamespacePolicy(namespace);
  const have =
    deps.networkPolicies.get(namespace, NAMESPACE_DENY_ALL_POLICY) ??
    (await createOrRead(deps, namespace, want));
  if (have && !isNamespacePolicyIntact(have, want)) {
    const labels = { ...have.metadata?.labels, ...want.metadata?.labels };
    await deps.kube.replaceNetworkPolicy(namespace, {
      ...have,
      metadata: { ...have.metadata, labels },
      spec: want.spec,
    });
    deps.logger.warn(
      { namespace, policy: NAMESPACE_DENY_ALL_POLICY },
      'Restored the namespace deny-all NetworkPolicy',
    );
  }
  deps.namespacePolicies.mark(namespace);
}

/** Creates the policy (undefined: made as wanted), or reads the one that exists already. */
async function createOrRead(
  deps: NamespacePolicyDeps,
  namespace: string,
  want: NetworkPolicy,
): Promise<NetworkPolicy | undefined> {
  try {
    await deps.kube.createNetworkPolicy(namespace, want);
    deps.logger.info(
      { namespace, policy: NAMESPACE_DENY_ALL_POLICY },
      'Created the namespace deny-all NetworkPolicy',
    );
    return undefined;
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
    return deps.kube.getNetworkPolicy(namespace, NAMESPACE_DENY_ALL_POLICY);
  }
}
