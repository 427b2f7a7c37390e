// Egress by allowlist on Kubernetes (issue 17), on the real test cluster. This cluster enforces no
// NetworkPolicy and tests never send traffic to pod or Service addresses, so what is checked is the
// objects the operator makes: the run's NetworkPolicy (egress only to the egress proxy's pods on
// its port, plus the CIDR entries), its owned Secret with the proxy URL and credential, the pod's
// env taken from that Secret, and what the program sees; the program makes no connection at all.
// The proxy's Service exists (its cluster IP goes into the proxy URL) but no proxy pod runs. First,
// an operator whose config does not declare NetworkPolicy enforced for egress refuses the run.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  NetworkingV1Api,
  type V1NetworkPolicy,
  type V1Secret,
  type V1Service,
} from '@kubernetes/client-node';
import { egressCredential } from '../../../src/egress/credential.js';
import { withCluster } from '../../support/kube/index.js';
import {
  bindLeaseRole,
  createRun,
  installOperatorApi,
  OperatorProcess,
  podsOf,
  sandboxRun,
  waitForFinished,
  type OperatorConfig,
  type Suite,
} from './operator-harness.js';
import { createPool, waitPoolReady } from './pool-harness.js';

const KEY = Buffer.from('sandpit-egress-test-key-0123456789abcdef');
const PROXY_LABELS = { 'app.kubernetes.io/name': 'sandpit', 'app.kubernetes.io/component': 'egress-proxy' };
const IMAGE = `${process.env.SANDPIT_TEST_IMAGE_REPO ?? 'sandpit'}/python:3.11`;
// Reads the proxy variables the runner passed on; opens no socket and resolves no name.
const PROBE = [
  'import os, urllib.parse as u',
  'p = u.urlsplit(os.environ["HTTPS_PROXY"])',
  'print(p.hostname, p.port, p.username, os.environ["HTTP_PROXY"] == os.environ["https_proxy"], os.environ["NO_PROXY"])',
].join('\n');
const ALLOW = [{ host: 'pypi.sandpit.test' }, { cidr: '192.0.2.0/28', ports: [5432] }];

describe('a SandboxRun with an egress allowlist', { timeout: 300_000 }, () => {
  let suite: Suite | undefined;
  let keyDir = '';
  let service: V1Service | undefined;
  const config = (enforced: boolean): Omit<OperatorConfig, 'namespace'> => ({
    sandbox: {
      imageAllowlist: ['sandpit/*', `${IMAGE.split('/')[0]}/*`],
      disableNetwork: false,
      egress: { allow: ['pypi.sandpit.test', '192.0.2.0/28:5432'] },
    },
    kubernetes: {
      egress: {
        enabled: true,
        networkPolicyEnforced: enforced,
        namespace: suite?.ns,
        keyFile: path.join(keyDir, 'key'),
        podLabels: PROXY_LABELS,
        namespaceLabels: { 'sandpit.dev/egress-proxy': 'true' },
      },
    },
  });
  const started = async (op: OperatorProcess): Promise<void> => {
    await op.waitForLog((l) => l.msg === 'Synced caches', 60_000, 'Synced caches');
  };

  before(async () => {
    const cluster = await withCluster();
    await installOperatorApi(cluster);
    const ns = await cluster.createNamespace('operator-egress');
    await bindLeaseRole(cluster, ns);
    keyDir = mkdtempSync(path.join(tmpdir(), 'sandpit-egress-key-'));
    writeFileSync(path.join(keyDir, 'key'), KEY, { mode: 0o600 });
    // The proxy's Service, as the chart makes it; its selector matches no pod here.
    service = await cluster.core.createNamespacedService({
      namespace: ns,
      body: {
        metadata: { name: 'sandpit-egress-proxy' },
        spec: { selector: PROXY_LABELS, ports: [{ name: 'proxy', port: 3128, targetPort: 3128 }] },
      },
    });
    suite = { cluster, ns, operator: undefined as unknown as OperatorProcess };
  });

  after(async () => {
    if (suite?.operator) await suite.operator.stop();
    if (suite) await suite.cluster.deleteNamespace(suite.ns);
    rmSync(keyDir, { recursive: true, force: true });
  });

  test('is Rejected (PolicyDenied) while egress.networkPolicyEnforced is not set', async () => {
    const s = suite!;
    const op = OperatorProcess.start(s.cluster, { namespace: s.ns, ...config(false) });
    try {
      await started(op);
      await createRun(
        s.cluster,
        s.ns,
        sandboxRun('refused', {
          template: 'python',
          image: IMAGE,
          code: PROBE,
          network: { egress: 'allowlist', allow: ALLOW },
        }),
      );
      const done = await waitForFinished(s.cluster, s.ns, 'refused', 60_000);
      assert.deepEqual(
        [done.status?.phase, done.status?.reason],
        ['Rejected', 'PolicyDenied'],
        JSON.stringify(done.status),
      );
      assert.match(done.status?.message ?? '', /egress\.networkPolicyEnforced/);
      assert.deepEqual(await podsOf(s, done), []);
    } finally {
      await op.stop();
    }
  });

  test('runs with its NetworkPolicy, Secret and env, and the program sees the proxy (no connection made)', async () => {
    const s = suite!;
    s.operator = OperatorProcess.start(s.cluster, { namespace: s.ns, ...config(true) });
    await started(s.operator);
    const run = await createRun(
      s.cluster,
      s.ns,
      sandboxRun('allowed', {
        template: 'python',
        image: IMAGE,
        code: PROBE,
        network: { egress: 'allowlist', allow: ALLOW },
      }),
    );
    const uid = run.metadata?.uid ?? '';
    const done = await waitForFinished(s.cluster, s.ns, 'allowed', 120_000);
    assert.equal(done.status?.phase, 'Succeeded', JSON.stringify(done.status));
    const ip = service?.spec?.clusterIP;
    assert.ok(ip);
    assert.equal(done.status?.output?.tail, `${ip} 3128 run-${uid} True localhost,127.0.0.1,::1\n`);

    const [pod] = await podsOf(s, done);
    assert.ok(pod, 'the run pod');
    const policies = await s.cluster.kc
      .makeApiClient(NetworkingV1Api)
      .listNamespacedNetworkPolicy({ namespace: s.ns });
    const np = policies.items.find((p: V1NetworkPolicy) => p.metadata?.ownerReferences?.[0]?.uid === uid);
    assert.ok(np, 'the run NetworkPolicy');
    assert.deepEqual(np.spec?.podSelector?.matchLabels, { 'sandpit.dev/run-uid': uid });
    assert.deepEqual(np.spec?.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(np.spec?.ingress ?? [], []);
    assert.deepEqual(JSON.parse(JSON.stringify(np.spec?.egress)), [
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'sandpit.dev/egress-proxy': 'true' } },
            podSelector: { matchLabels: PROXY_LABELS },
          },
        ],
        ports: [{ protocol: 'TCP', port: 3128 }],
      },
      { to: [{ ipBlock: { cidr: '192.0.2.0/28' } }], ports: [{ protocol: 'TCP', port: 5432 }] },
    ]);
    // The fixed namespace-wide deny-all still selects every sandpit pod.
    const denyAll = policies.items.find((p: V1NetworkPolicy) => p.metadata?.name === 'sandpit-deny-all');
    assert.deepEqual(denyAll?.spec?.podSelector?.matchLabels, {
      'sandpit.dev/managed-by': 'sandpit-operator',
    });
    assert.deepEqual(denyAll?.spec?.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual([denyAll?.spec?.ingress ?? [], denyAll?.spec?.egress ?? []], [[], []]);

    const secret: V1Secret = await s.cluster.core.readNamespacedSecret({
      namespace: s.ns,
      name: np.metadata?.name ?? '',
    });
    assert.equal(secret.metadata?.ownerReferences?.[0]?.uid, uid);
    assert.equal(secret.metadata?.ownerReferences?.[0]?.controller, true);
    assert.equal(secret.immutable, true);
    const url = new URL(Buffer.from(secret.data?.['proxy-url'] ?? '', 'base64').toString());
    assert.equal(url.host, `${ip}:3128`);
    assert.equal(url.username, `run-${uid}`);
    assert.equal(url.password, egressCredential(KEY, { kind: 'run', uid }));

    const env = pod.spec?.containers[0]?.env ?? [];
    const proxyVar = env.find((e) => e.name === 'HTTPS_PROXY');
    assert.deepEqual(
      { ...proxyVar?.valueFrom?.secretKeyRef },
      { name: secret.metadata?.name, key: 'proxy-url' },
    );
    assert.ok(!JSON.stringify(pod.spec).includes(url.password), 'no credential in the pod spec');
    assert.equal(pod.spec?.dnsPolicy, 'None');
    // The stored policy reads as the one the operator wants: it was never 'restored'.
    assert.equal(
      s.operator.find(
        (l) => typeof l.msg === 'string' && /NetworkPolicyRestored|restored its rules/.test(l.msg),
      ),
      undefined,
    );
    const events = await s.cluster.core.listNamespacedEvent({ namespace: s.ns });
    assert.deepEqual(
      events.items.filter((e) => e.reason === 'NetworkPolicyRestored').map((e) => e.message),
      [],
    );
    assert.deepEqual(pod.spec?.dnsConfig?.nameservers, ['127.0.0.1']);
  });

  test('warm: a pool of egress allowlist serves it; the pool pod carried only the proxy address, the job brought the credential', async () => {
    const s = suite!;
    await createPool(s.cluster, s.ns, 'py-egress', {
      template: 'python',
      image: IMAGE,
      egress: 'allowlist',
      mode: 'run',
      replicas: 1,
      maxIdleSeconds: 600,
    });
    await waitPoolReady(s.cluster, s.ns, 'py-egress', 1, 120_000);
    const [idle] = (
      await s.cluster.core.listNamespacedPod({ namespace: s.ns, labelSelector: 'sandpit.dev/pool=py-egress' })
    ).items;
    assert.ok(idle, 'the pool pod');
    const idleEnv = JSON.parse(JSON.stringify(idle.spec?.containers[0]?.env ?? [])) as unknown;
    assert.deepEqual(idleEnv, [{ name: 'SANDPIT_EGRESS_PROXY', value: `${service?.spec?.clusterIP}:3128` }]);

    const run = await createRun(
      s.cluster,
      s.ns,
      sandboxRun('warm', {
        template: 'python',
        image: IMAGE,
        code: PROBE,
        network: { egress: 'allowlist', allow: ALLOW },
      }),
    );
    const uid = run.metadata?.uid ?? '';
    const done = await waitForFinished(s.cluster, s.ns, 'warm', 120_000);
    assert.equal(done.status?.phase, 'Succeeded', JSON.stringify(done.status));
    assert.equal(done.status?.served, 'warm', JSON.stringify(done.status));
    assert.equal(done.status?.podName, idle.metadata?.name);
    assert.equal(
      done.status?.output?.tail,
      `${service?.spec?.clusterIP} 3128 run-${uid} True localhost,127.0.0.1,::1\n`,
    );
    // The claimed pod is selected by the run's policy: egress to the proxy and the CIDR entry.
    const np = (
      await s.cluster.kc.makeApiClient(NetworkingV1Api).listNamespacedNetworkPolicy({ namespace: s.ns })
    ).items.find((p: V1NetworkPolicy) => p.metadata?.ownerReferences?.[0]?.uid === uid);
    assert.deepEqual(np?.spec?.podSelector?.matchLabels, { 'sandpit.dev/run-uid': uid });
    assert.equal(np?.spec?.egress?.length, 2);
  });
});
