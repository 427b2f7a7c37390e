// What the egress tests on the real cluster share (issue 17). This cluster enforces no
// NetworkPolicy and tests never send traffic to pod or Service addresses, so they check the objects
// the operator makes. Here: a namespace with the proxy key in a file the operator reads, the proxy's
// Service as the chart makes it (its cluster IP goes into the proxy URLs; no proxy pod runs behind
// it), operators with NetworkPolicy enforcement declared or not, and the checks of a sandbox's
// NetworkPolicy (egress only to the proxy's pods on its port, plus the CIDR entry) and its Secret.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { NetworkingV1Api, type V1NetworkPolicy, type V1Pod } from '@kubernetes/client-node';
import { egressCredential, type EgressOwnerKind } from '../../../src/egress/credential.js';
import { withCluster, type KubeCluster } from '../../support/kube/index.js';
import { bindGatewayRbac } from '../../contract/kube-gateway.js';
import {
  bindLeaseRole,
  installOperatorApi,
  OperatorProcess,
  type OperatorConfig,
} from './operator-harness.js';

export const EGRESS_KEY = Buffer.from('sandpit-egress-test-key-0123456789abcdef');
const PROXY_LABELS = { 'app.kubernetes.io/name': 'sandpit', 'app.kubernetes.io/component': 'egress-proxy' };
const PROXY_NAMESPACE_LABELS = { 'sandpit.dev/egress-proxy': 'true' };
export const EGRESS_IMAGE = `${process.env.SANDPIT_TEST_IMAGE_REPO ?? 'sandpit'}/python:3.11`;
export const EGRESS_ALLOW = [{ host: 'pypi.sandpit.test' }, { cidr: '192.0.2.0/28', ports: [5432] }];
/** The operator's ceiling, which EGRESS_ALLOW stays within. */
export const EGRESS_CEILING = ['pypi.sandpit.test', '192.0.2.0/28:5432'];

export interface EgressSuite {
  cluster: KubeCluster;
  ns: string;
  /** The proxy Service's cluster IP: the host of every proxy URL. */
  proxyIp: string;
  /** The operator with NetworkPolicy enforcement declared for egress or not, its caches synced. */
  start(enforced: boolean): Promise<OperatorProcess>;
  /** Stops the operators still running, deletes the namespace and the key. */
  close(): Promise<void>;
}

/** A namespace with the operator's API and Lease role (and the gateway's roles), the key, the proxy's Service. */
export async function startEgressSuite(hint: string, o: { gateway?: boolean } = {}): Promise<EgressSuite> {
  const cluster = await withCluster();
  await installOperatorApi(cluster);
  const ns = await cluster.createNamespace(hint);
  await bindLeaseRole(cluster, ns);
  if (o.gateway) await bindGatewayRbac(cluster, ns);
  const keyDir = mkdtempSync(path.join(tmpdir(), 'sandpit-egress-key-'));
  const keyFile = path.join(keyDir, 'key');
  writeFileSync(keyFile, EGRESS_KEY, { mode: 0o600 });
  const service = await cluster.core.createNamespacedService({
    namespace: ns,
    body: {
      metadata: { name: 'sandpit-egress-proxy' },
      spec: { selector: PROXY_LABELS, ports: [{ name: 'proxy', port: 3128, targetPort: 3128 }] },
    },
  });
  const proxyIp = service.spec?.clusterIP ?? '';
  assert.ok(proxyIp, 'the proxy Service has a cluster IP');
  const operators: OperatorProcess[] = [];
  const config = (enforced: boolean): Omit<OperatorConfig, 'namespace'> => ({
    sandbox: {
      imageAllowlist: ['sandpit/*', `${EGRESS_IMAGE.split('/')[0]}/*`],
      disableNetwork: false,
      egress: { allow: EGRESS_CEILING },
    },
    kubernetes: {
      egress: {
        enabled: true,
        networkPolicyEnforced: enforced,
        namespace: ns,
        keyFile,
        podLabels: PROXY_LABELS,
        namespaceLabels: PROXY_NAMESPACE_LABELS,
      },
    },
  });
  return {
    cluster,
    ns,
    proxyIp,
    async start(enforced) {
      const op = OperatorProcess.start(cluster, { namespace: ns, ...config(enforced) });
      operators.push(op);
      await op.waitForLog((l) => l.msg === 'Synced caches', 60_000, 'Synced caches');
      return op;
    },
    async close() {
      for (const op of operators) await op.stop();
      await cluster.deleteNamespace(ns);
      rmSync(keyDir, { recursive: true, force: true });
    },
  };
}

/** The NetworkPolicy the owner with this UID controls, checked: egress only to the proxy and the CIDR entry. */
export async function assertEgressPolicy(
  cluster: KubeCluster,
  ns: string,
  owner: { uid: string; selector: Record<string, string> },
): Promise<V1NetworkPolicy> {
  const policies = await cluster.kc
    .makeApiClient(NetworkingV1Api)
    .listNamespacedNetworkPolicy({ namespace: ns });
  const np = policies.items.find((p) => p.metadata?.ownerReferences?.[0]?.uid === owner.uid);
  assert.ok(np, 'the NetworkPolicy of the owner');
  assert.deepEqual(np.spec?.podSelector?.matchLabels, owner.selector);
  assert.deepEqual(np.spec?.policyTypes, ['Ingress', 'Egress']);
  assert.deepEqual(np.spec?.ingress ?? [], []);
  assert.deepEqual(JSON.parse(JSON.stringify(np.spec?.egress)), [
    {
      to: [
        {
          namespaceSelector: { matchLabels: PROXY_NAMESPACE_LABELS },
          podSelector: { matchLabels: PROXY_LABELS },
        },
      ],
      ports: [{ protocol: 'TCP', port: 3128 }],
    },
    { to: [{ ipBlock: { cidr: '192.0.2.0/28' } }], ports: [{ protocol: 'TCP', port: 5432 }] },
  ]);
  // The fixed namespace-wide deny-all still selects every sandpit pod.
  const denyAll = policies.items.find((p) => p.metadata?.name === 'sandpit-deny-all');
  assert.deepEqual(denyAll?.spec?.podSelector?.matchLabels, { 'sandpit.dev/managed-by': 'sandpit-operator' });
  assert.deepEqual(denyAll?.spec?.policyTypes, ['Ingress', 'Egress']);
  assert.deepEqual([denyAll?.spec?.ingress ?? [], denyAll?.spec?.egress ?? []], [[], []]);
  return np;
}

/**
 * The owner's Secret (named as its NetworkPolicy and pod), checked: controlled by the owner,
 * immutable, the proxy URL with the owner's credential; and the pod's env taking the proxy
 * variables from it, with no credential in the pod spec. Returns the proxy URL.
 */
export async function assertEgressSecret(
  cluster: KubeCluster,
  ns: string,
  owner: { kind: EgressOwnerKind; uid: string; name: string; proxyIp: string; pod: V1Pod },
): Promise<URL> {
  const secret = await cluster.core.readNamespacedSecret({ namespace: ns, name: owner.name });
  assert.equal(secret.metadata?.ownerReferences?.[0]?.uid, owner.uid);
  assert.equal(secret.metadata?.ownerReferences?.[0]?.controller, true);
  assert.equal(secret.immutable, true);
  const url = new URL(Buffer.from(secret.data?.['proxy-url'] ?? '', 'base64').toString());
  assert.equal(url.host, `${owner.proxyIp}:3128`);
  assert.equal(url.username, `${owner.kind}-${owner.uid}`);
  assert.equal(url.password, egressCredential(EGRESS_KEY, { kind: owner.kind, uid: owner.uid }));

  const { pod } = owner;
  const env = pod.spec?.containers[0]?.env ?? [];
  for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) {
    const v = env.find((e) => e.name === name);
    assert.deepEqual({ ...v?.valueFrom?.secretKeyRef }, { name: owner.name, key: 'proxy-url' }, name);
  }
  assert.ok(!JSON.stringify(pod.spec).includes(url.password), 'no credential in the pod spec');
  assert.equal(pod.spec?.dnsPolicy, 'None');
  assert.deepEqual(pod.spec?.dnsConfig?.nameservers, ['127.0.0.1']);
  return url;
}
