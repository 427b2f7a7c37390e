// End to end through the real operator (`sandpit operator`, its own RBAC identity): the gateway's
// Kubernetes backend (the gateway identity) creates a Sandbox, the operator's Sandbox controller
// makes the session pod and says Ready, the gateway attaches and serves the session; delete
// removes the Sandbox, and its pod and Lease go with it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { withCluster } from '../../support/kube/index.js';
import { eventually, MiB, readAll, runExec, sessionId, sessionSpec } from '../../support/sessions.js';
import { bindGatewayRbac, gatewayBackend } from '../../contract/kube-gateway.js';
import { startSuite, stopSuite, type Suite } from './operator-harness.js';

let suite: Suite;
let failed = false;

describe('sessions through the gateway backend and the real operator', { timeout: 600_000 }, () => {
  before(async () => {
    suite = await startSuite(await withCluster(), 'gw-sessions-op');
    await bindGatewayRbac(suite.cluster, suite.ns);
  });
  after(async () => stopSuite(suite, failed, (l) => console.error(l)));

  test('create → three execs sharing files → download → delete leaves nothing', async () => {
    const { cluster, ns } = suite;
    const backend = gatewayBackend(cluster, ns);
    try {
      const spec = sessionSpec({ template: 'python', secrets: [{ name: 'TOKEN', value: 's3cret' }] });
      const id = sessionId('ses').toLowerCase();
      const sandbox = await backend.sessions.createSession(spec, { sessionId: id, principal: 'tester' });
      const a = await runExec(sandbox, spec, { shell: 'mkdir -p data; echo 41 > data/n' });
      assert.equal(a.outcome.phase, 'Succeeded', a.stderr.text);
      await sandbox.writeFile({
        path: 'step.py',
        data: Buffer.from('print(int(open("data/n").read()) + 1)\n'),
      });
      const b = await runExec(sandbox, spec, { command: ['python3', 'step.py'] });
      assert.equal(b.stdout.text, '42\n');
      const c = await runExec(sandbox, spec, { shell: 'echo "$TOKEN"; id -u' });
      assert.equal(c.stdout.text, 's3cret\n1000\n');
      const read = await sandbox.readFile({ path: 'data/n', maxBytes: MiB });
      assert.equal((await readAll(read.data)).toString(), '41\n');
      await sandbox.close('Deleted');
      const left = async () =>
        (await cluster.core.listNamespacedPod({ namespace: ns, labelSelector: `sandpit.dev/session=${id}` }))
          .items.length;
      assert.ok(await eventually(async () => (await left()) === 0, 60_000, 250), 'the session pod is gone');
    } catch (e) {
      failed = true;
      throw e;
    } finally {
      await backend.close();
    }
  });
});
