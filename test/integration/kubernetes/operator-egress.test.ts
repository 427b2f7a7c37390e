// Egress by allowlist on Kubernetes (issue 17), on the real test cluster. This cluster enforces no
// NetworkPolicy and tests never send traffic to pod or Service addresses, so what is checked is the
// objects the operator makes: the run's NetworkPolicy (egress only to the egress proxy's pods on
// its port, plus the CIDR entries), its owned Secret with the proxy URL and credential, the pod's
// env taken from that Secret, and what the program sees; the program makes no connection at all.
// The proxy's Service exists (its cluster IP goes into the proxy URL) but no proxy pod runs. First,
// an operator whose config does not declare NetworkPolicy enforced for egress refuses the run.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { CoreV1Event } from '@kubernetes/client-node';
import {
  assertEgressPolicy,
  assertEgressSecret,
  EGRESS_ALLOW as ALLOW,
  EGRESS_IMAGE as IMAGE,
  startEgressSuite,
  type EgressSuite,
} from './egress-harness.js';
import { createRun, podsOf, sandboxRun, waitForFinished, type OperatorProcess } from './operator-harness.js';
import { createPool, waitPoolReady } from './pool-harness.js';

// Reads the proxy variables the runner passed on; opens no socket and resolves no name.
const PROBE = [
  'import os, urllib.parse as u',
  'p = u.urlsplit(os.environ["HTTPS_PROXY"])',
  'print(p.hostname, p.port, p.username, os.environ["HTTP_PROXY"] == os.environ["https_proxy"], os.environ["NO_PROXY"])',
].join('\n');

describe('a SandboxRun with an egress allowlist', { timeout: 300_000 }, () => {
  let suite: EgressSuite | undefined;
  let operator: OperatorProcess;

  before(async () => {
    suite = await startEgressSuite('operator-egress');
  });

  after(async () => suite?.close());

  test('is Rejected (PolicyDenied) while egress.networkPolicyEnforced is not set', async () => {
    const s = suite!;
    const op = await s.start(false);
    try {
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
    operator = await s.start(true);
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
    const ip = s.proxyIp;
    assert.equal(done.status?.output?.tail, `${ip} 3128 run-${uid} True localhost,127.0.0.1,::1\n`);

    const [pod] = await podsOf(s, done);
    assert.ok(pod, 'the run pod');
    const np = await assertEgressPolicy(s.cluster, s.ns, { uid, selector: { 'sandpit.dev/run-uid': uid } });
    await assertEgressSecret(s.cluster, s.ns, {
      kind: 'run',
      uid,
      name: np.metadata?.name ?? '',
      proxyIp: ip,
      pod,
    });
    // The stored policy reads as the one the operator wants: it was never 'restored'.
    assert.equal(
      operator.find(
        (l) => typeof l.msg === 'string' && /NetworkPolicyRestored|restored its rules/.test(l.msg),
      ),
      undefined,
    );
    // Events are written in order, a moment after they are recorded (controller/events.ts): once
    // the run's last one is there, every one recorded before it is too.
    await s.cluster.waitFor<CoreV1Event>(
      { path: `/api/v1/namespaces/${s.ns}/events`, fieldSelector: 'involvedObject.name=allowed' },
      (e) => e.reason === 'Succeeded',
      { timeoutMs: 15_000, description: 'the Succeeded Event' },
    );
    const events = await s.cluster.core.listNamespacedEvent({ namespace: s.ns });
    assert.deepEqual(
      events.items.filter((e) => e.reason === 'NetworkPolicyRestored').map((e) => e.message),
      [],
    );
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
    assert.deepEqual(idleEnv, [{ name: 'SANDPIT_EGRESS_PROXY', value: `${s.proxyIp}:3128` }]);

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
    assert.equal(done.status?.output?.tail, `${s.proxyIp} 3128 run-${uid} True localhost,127.0.0.1,::1\n`);
    // The claimed pod is selected by the run's policy: egress to the proxy and the CIDR entry.
    await assertEgressPolicy(s.cluster, s.ns, { uid, selector: { 'sandpit.dev/run-uid': uid } });
  });
});
