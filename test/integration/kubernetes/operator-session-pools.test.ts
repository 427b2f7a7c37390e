// Sessions from a SandboxPool of mode session, on the real cluster with the real operator: the
// gateway's Kubernetes backend creates a session whose shape and variables are the pool's, and the
// operator hands it one of the pool's ready pods (one guarded update: labels, owner, deadline)
// instead of creating one; execs, files and secrets work as in a pod of its own; the pool fills
// up again; a session with variables of its own is served cold; closing the session removes the pod.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import type { SandboxPool } from '../../../src/api/v1alpha1/sandboxpool.js';
import { withCluster, type KubeCluster } from '../../support/kube/index.js';
import { eventually, runExec, sessionId, sessionSpec } from '../../support/sessions.js';
import { bindGatewayRbac, gatewayBackend } from '../../contract/kube-gateway.js';
import { customApi, startSuite, stopSuite, type Suite } from './operator-harness.js';
import { getSandbox } from './sandbox-harness.js';

const poolApi = { group: 'sandpit.dev', version: 'v1alpha1', plural: 'sandboxpools' };
const POOL = 'py-sessions';

let suite: Suite;
let failed = false;

async function poolPods(cluster: KubeCluster, ns: string, state: string): Promise<V1Pod[]> {
  const { items } = await cluster.core.listNamespacedPod({
    namespace: ns,
    labelSelector: `sandpit.dev/pool=${POOL},sandpit.dev/pool-pod=${state}`,
  });
  return items;
}

const readyPods = async (cluster: KubeCluster, ns: string): Promise<V1Pod[]> =>
  (await poolPods(cluster, ns, 'idle')).filter(
    (p) =>
      !p.metadata?.deletionTimestamp &&
      p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );

describe('sessions from a SandboxPool (mode session)', { timeout: 600_000 }, () => {
  before(async () => {
    suite = await startSuite(await withCluster(), 'session-pools');
    await bindGatewayRbac(suite.cluster, suite.ns);
    const pool: SandboxPool = {
      apiVersion: 'sandpit.dev/v1alpha1',
      kind: 'SandboxPool',
      metadata: { name: POOL },
      spec: { template: 'python', mode: 'session', replicas: 1 },
    };
    await customApi(suite.cluster).createNamespacedCustomObject({
      ...poolApi,
      namespace: suite.ns,
      body: pool,
    });
    assert.ok(
      await eventually(async () => (await readyPods(suite.cluster, suite.ns)).length === 1, 120_000, 250),
      'the pool has a ready pod',
    );
  });
  after(async () => stopSuite(suite, failed, (l) => console.error(l)));

  test('a session of the pool’s shape takes its ready pod, works as any session, and the pool refills', async () => {
    const { cluster, ns } = suite;
    const backend = gatewayBackend(cluster, ns);
    try {
      const [idle] = await readyPods(cluster, ns);
      const spec = sessionSpec({ template: 'python', secrets: [{ name: 'TOKEN', value: 's3cret' }] });
      const id = sessionId('warm').toLowerCase();
      const session = await backend.sessions.createSession(spec, { sessionId: id, principal: 'tester' });
      const sbx = await getSandbox(cluster, ns, id);
      assert.equal(sbx?.status?.served, 'warm', JSON.stringify(sbx?.status));
      assert.equal(sbx?.status?.pool, POOL);
      assert.equal(sbx?.status?.podName, idle?.metadata?.name, 'the pool’s pod, not a new one');

      const pod = await cluster.core.readNamespacedPod({ namespace: ns, name: sbx?.status?.podName ?? '' });
      assert.equal(pod.metadata?.labels?.['sandpit.dev/pool-pod'], 'claimed');
      assert.equal(pod.metadata?.labels?.['sandpit.dev/session-uid'], sbx?.metadata?.uid);
      assert.deepEqual(
        pod.metadata?.ownerReferences?.map((o) => [o.kind, o.uid, o.controller]),
        [['Sandbox', sbx?.metadata?.uid, true]],
        'the Sandbox is its only owner',
      );

      const a = await runExec(session, spec, { shell: 'echo "$TOKEN"; id -u; echo x > f; cat f' });
      assert.equal(a.outcome.phase, 'Succeeded', a.stderr.text);
      assert.equal(a.stdout.text, 's3cret\n1000\nx\n');
      assert.ok(
        await eventually(async () => (await readyPods(cluster, ns)).length === 1, 60_000, 250),
        'the pool refills to one ready pod',
      );
      await session.close('Deleted');
      assert.ok(
        await eventually(async () => (await poolPods(cluster, ns, 'claimed')).length === 0, 60_000, 250),
        'the claimed pod is gone once the session ended',
      );
    } catch (e) {
      failed = true;
      throw e;
    } finally {
      await backend.close();
    }
  });

  test('a session with variables of its own is served cold: the pool’s pods carry only the template’s', async () => {
    const { cluster, ns } = suite;
    const backend = gatewayBackend(cluster, ns);
    try {
      const spec = sessionSpec({ template: 'python', env: [{ name: 'MINE', value: '1' }] });
      const id = sessionId('cold').toLowerCase();
      const session = await backend.sessions.createSession(spec, { sessionId: id, principal: 'tester' });
      const sbx = await getSandbox(cluster, ns, id);
      assert.equal(sbx?.status?.served, 'cold', JSON.stringify(sbx?.status));
      assert.equal(sbx?.status?.pool, undefined);
      const a = await runExec(session, spec, { shell: 'echo "$MINE"' });
      assert.equal(a.stdout.text, '1\n');
      assert.equal((await readyPods(cluster, ns)).length, 1, 'the pool’s pod stays idle');
      await session.close('Deleted');
    } catch (e) {
      failed = true;
      throw e;
    } finally {
      await backend.close();
    }
  });
});
