// The gateway's side of the cluster for the contract tier: deploy/gateway-rbac.yaml's ClusterRoles,
// bound in a test namespace to the cluster script's static gateway user (never admin), and a
// KubernetesBackend that authenticates as that user.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import {
  KubernetesBackend,
  type KubernetesBackendOptions,
} from '../../src/backends/kubernetes/kubernetes-backend.js';
import { GATEWAY_LEASE_ROLE, GATEWAY_ROLE } from '../../src/backends/kubernetes/permissions.js';
import { REPO_ROOT } from '../support/kube/env.js';
import { startServe, type Served } from '../e2e/helpers.js';
import type { Suite } from '../integration/kubernetes/operator-harness.js';
import { CONTRACT_SANDBOX_CONFIG, contractPolicy } from './target.js';
import type { KubeCluster } from '../support/kube/index.js';

/** The operator's Lease name (the config default the test operators keep). */
export const LEASE_NAME = 'sandpit-operator';

/**
 * Applies the gateway's ClusterRoles (idempotent) and binds `bound` (both by default) to the gateway
 * user in `namespace`; a tenant namespace needs only the run role.
 */
export async function bindGatewayRbac(
  cluster: KubeCluster,
  namespace: string,
  bound: readonly string[] = [GATEWAY_ROLE, GATEWAY_LEASE_ROLE],
): Promise<void> {
  const roles = parseAllDocuments(readFileSync(path.join(REPO_ROOT, 'deploy/gateway-rbac.yaml'), 'utf8'))
    .map((d) => d.toJS() as { kind: string })
    .filter((d) => d.kind === 'ClusterRole');
  await cluster.applyShared('-', roles.map((d) => stringify(d)).join('---\n'));
  for (const role of bound) {
    await cluster.rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: cluster.userOf('gateway') }],
      },
    });
  }
}

/** A backend as the gateway identity, creating runs in `namespace` (where the operator's Lease also lives). */
export function gatewayBackend(
  cluster: KubeCluster,
  namespace: string,
  overrides: Partial<Omit<KubernetesBackendOptions, 'policy'>> & {
    policy?: KubernetesBackendOptions['policy'];
  } = {},
): KubernetesBackend {
  return new KubernetesBackend({
    kubeConfig: cluster.kubeConfigFor('gateway', namespace),
    namespace,
    lease: { namespace, name: LEASE_NAME },
    ttlSecondsAfterFinished: 600,
    pendingTimeoutSeconds: 60,
    pickupTimeoutSeconds: 30,
    policy: contractPolicy([]),
    ...overrides,
  });
}

/** The built CLI's `sandpit serve` in Kubernetes mode: the gateway identity, runs in the suite's namespace. */
export function serveKubernetesGateway(
  suite: Suite,
  sandbox: object = CONTRACT_SANDBOX_CONFIG,
): Promise<Served> {
  return startServe({
    sandbox: { backend: 'kubernetes', ...sandbox },
    kubernetes: {
      gateway: { kubeconfig: suite.cluster.env.identities.gateway.kubeconfigPath, namespace: suite.ns },
      operator: { leaseNamespace: suite.ns },
    },
    logging: { level: 'debug' },
  });
}
