// Egress by allowlist for sessions on Kubernetes (issue 17), on the real test cluster, checked on
// the objects as for runs (egress-harness.ts): no traffic goes to pod or Service addresses, and the
// programs make no connection. An operator not declared to enforce NetworkPolicy refuses the
// Sandbox (Failed, PolicyDenied); one declared to enforce it makes the Sandbox Ready with its
// NetworkPolicy, its own Secret and the pod's env from it; and through the gateway's backend an
// exec in such a session sees HTTPS_PROXY pointing at the proxy with the session's credential (the
// last test runs on the operator the one before it started).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { toEntry } from '../../../src/api/egress.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { runExec, sessionId, sessionSpec } from '../../support/sessions.js';
import { gatewayBackend } from '../../contract/kube-gateway.js';
import {
  assertEgressPolicy,
  assertEgressSecret,
  EGRESS_ALLOW,
  EGRESS_CEILING,
  EGRESS_IMAGE,
  startEgressSuite,
  type EgressSuite,
} from './egress-harness.js';
import { createSandbox, sandbox, sessionPods, waitForEnd, waitForReady } from './sandbox-harness.js';

const NETWORK = { egress: 'allowlist', allow: EGRESS_ALLOW } as const;
// Reads the proxy variables the runner passed on to the exec; opens no socket, resolves no name.
const PROBE = 'import os; print(os.environ["HTTPS_PROXY"], os.environ["http_proxy"], os.environ["NO_PROXY"])';

describe('a Sandbox with an egress allowlist', { timeout: 300_000 }, () => {
  let suite: EgressSuite | undefined;

  before(async () => {
    suite = await startEgressSuite('session-egress', { gateway: true });
  });

  after(async () => suite?.close());

  test('is Failed (PolicyDenied) while egress.networkPolicyEnforced is not set, with no pod', async () => {
    const s = suite!;
    const op = await s.start(false);
    try {
      await createSandbox(
        s.cluster,
        s.ns,
        sandbox('refused', { template: 'python', image: EGRESS_IMAGE, network: NETWORK }),
      );
      const ended = await waitForEnd(s.cluster, s.ns, 'refused', 60_000);
      assert.deepEqual(
        [ended.status?.phase, ended.status?.reason],
        ['Failed', 'PolicyDenied'],
        JSON.stringify(ended.status),
      );
      assert.match(ended.status?.message ?? '', /egress\.networkPolicyEnforced/);
      const admitted = ended.status?.conditions?.find((c) => c.type === 'Admitted');
      assert.equal(admitted?.status, 'False');
      assert.deepEqual(await sessionPods(s.cluster, s.ns, ended), []);
    } finally {
      await op.stop();
    }
  });

  test('is Ready with its NetworkPolicy, its own Secret and the pod env from it', async () => {
    const s = suite!;
    await s.start(true);
    const created = await createSandbox(
      s.cluster,
      s.ns,
      sandbox('allowed', { template: 'python', image: EGRESS_IMAGE, network: NETWORK }),
    );
    const uid = created.metadata?.uid ?? '';
    const ready = await waitForReady(s.cluster, s.ns, 'allowed');
    assert.equal(ready.status?.phase, 'Ready', JSON.stringify(ready.status));
    const [pod] = await sessionPods(s.cluster, s.ns, ready);
    assert.ok(pod, 'the session pod');
    assert.equal(pod.metadata?.name, ready.status?.podName);
    assert.ok(!pod.spec?.containers[0]?.command?.includes('--no-network'));
    const np = await assertEgressPolicy(s.cluster, s.ns, {
      uid,
      selector: { 'sandpit.dev/session-uid': uid },
    });
    await assertEgressSecret(s.cluster, s.ns, {
      kind: 'sandbox',
      uid,
      name: np.metadata?.name ?? '',
      proxyIp: s.proxyIp,
      pod,
    });
  });

  test("through the gateway: an exec sees HTTPS_PROXY at the proxy with the session's credential", async () => {
    const s = suite!;
    const policy = createPolicy({
      imageAllowlist: ['sandpit/*', `${EGRESS_IMAGE.split('/')[0]}/*`],
      egress: { disabled: false, ceiling: EGRESS_CEILING.map(toEntry) },
    });
    const backend = gatewayBackend(s.cluster, s.ns, { policy });
    try {
      const spec = sessionSpec({ template: 'python', image: EGRESS_IMAGE, network: NETWORK }, policy);
      const id = sessionId('egress').toLowerCase();
      const session = await backend.sessions.createSession(spec, { sessionId: id, principal: 'tester' });
      const exec = await runExec(session, spec, { command: ['python3', '-c', PROBE] }, { policy });
      assert.equal(exec.outcome.phase, 'Succeeded', exec.stderr.text);
      const [https, http, noProxy] = exec.stdout.text.trim().split(' ');
      const url = new URL(https ?? '');
      assert.equal(url.host, `${s.proxyIp}:3128`);
      const [pod] = (
        await s.cluster.core.listNamespacedPod({
          namespace: s.ns,
          labelSelector: `sandpit.dev/session=${id}`,
        })
      ).items;
      assert.ok(pod, 'the session pod');
      const owner = pod.metadata?.ownerReferences?.[0];
      assert.equal(owner?.kind, 'Sandbox');
      const secretUrl = await assertEgressSecret(s.cluster, s.ns, {
        kind: 'sandbox',
        uid: owner?.uid ?? '',
        name: pod.metadata?.name ?? '',
        proxyIp: s.proxyIp,
        pod,
      });
      assert.equal(https, secretUrl.href.replace(/\/$/, ''), 'the proxy URL of the session’s Secret');
      assert.equal(http, https);
      assert.equal(noProxy, 'localhost,127.0.0.1,::1');
      await session.close('Deleted');
    } finally {
      await backend.close();
    }
  });
});
