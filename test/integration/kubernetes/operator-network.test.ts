// Egress none fails closed (issue 11, item 3). This cluster enforces no NetworkPolicy (no policy
// plugin; every pod gets an eth0), and this operator's config does not declare enforcement: so a
// run under runc, which has eth0, is refused before its program starts, with the reason and what
// to configure in its status, an Event and the gateway's result; a run under gVisor (runsc
// --network=none: only lo) runs. No run ever starts with eth0. A session
// follows the same rule: its runner checks its interfaces before it answers, so a Sandbox under
// runc ends Failed, and one under gVisor is served.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { CoreV1Event } from '@kubernetes/client-node';
import { RunRequestSchema } from '../../../src/api/run.js';
import { NETWORK_WARNING } from '../../../src/cmd/operator.js';
import { evaluate } from '../../../src/policy/evaluate.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { bindGatewayRbac, gatewayBackend } from '../../contract/kube-gateway.js';
import { createRun, operatorSuite, sandboxRun, waitForFinished } from './operator-harness.js';
import { cancelSandbox, createSandbox, sandbox, waitForReady } from './sandbox-harness.js';

const GVISOR = 'gvisor';
/** Prints the interfaces the program sees (gVisor has no /sys/class/net: the kernel's own list). */
const PROBE = 'import socket\nprint("ran with", sorted(n for _, n in socket.if_nameindex()))';
const FIX =
  /networkPolicy\.enforced: true in the chart's values \(kubernetes\.operator\.networkPolicyEnforced\)/;

describe('egress none on a cluster that does not enforce NetworkPolicy', { timeout: 300_000 }, () => {
  const ops = operatorSuite('operator-network', {
    kubernetes: { allowedRuntimeClasses: [GVISOR, 'runc'] },
    // what a chart with networkPolicy.enforced unset renders: the setting absent
    operator: { networkPolicyEnforced: undefined },
  });
  const { it } = ops;

  it('the operator warns at start-up that the config says nothing about enforcement', async () => {
    const line = await ops.suite.operator.waitForLog((l) => l.msg === NETWORK_WARNING, 10_000, 'the warning');
    assert.equal(line.level, 40);
    assert.equal(line.setting, 'kubernetes.operator.networkPolicyEnforced');
  });

  it('a run under runc (its pod has eth0) is refused before the program runs: Started=False NetworkNotIsolated, an Event, the fix named', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(cluster, ns, sandboxRun('runc', { template: 'python', code: PROBE }));
    const done = await waitForFinished(cluster, ns, 'runc', 90_000);
    const s = done.status!;
    assert.equal(s.phase, 'Failed', JSON.stringify(s));
    assert.equal(s.reason, 'BackendError');
    assert.match(s.message ?? '', /network interface eth0/);
    assert.match(s.message ?? '', FIX);
    const started = s.conditions?.find((c) => c.type === 'Started');
    assert.equal(started?.status, 'False');
    assert.equal(started?.reason, 'NetworkNotIsolated');
    assert.doesNotMatch(s.output?.tail ?? '', /ran with/, 'the program never ran');
    const event = await cluster.waitFor<CoreV1Event>(
      { path: `/api/v1/namespaces/${ns}/events`, fieldSelector: `involvedObject.uid=${done.metadata?.uid}` },
      (e) => e.type === 'Warning' && e.reason === 'Failed',
      { timeoutMs: 15_000, description: 'the Failed event' },
    );
    assert.match(
      event.message ?? '',
      /BackendError: egress is none, but the sandbox has the network interface eth0/,
    );
    assert.match(event.message ?? '', /networkPolicy\.enforced/);
  });

  it('a run under gvisor (only lo) runs', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('gvisor', { template: 'python', code: PROBE, runtimeClassName: GVISOR }),
    );
    const done = await waitForFinished(cluster, ns, 'gvisor', 90_000);
    assert.equal(done.status?.phase, 'Succeeded', JSON.stringify(done.status));
    assert.equal(done.status?.output?.tail, "ran with ['lo']\n");
  });

  it('a Sandbox under runc (eth0) ends Failed before its runner serves it, naming the interface and the fix; one under gvisor (only lo) is Ready', async () => {
    const { cluster, ns } = ops.suite;
    const spec = { template: 'python', ttlSeconds: 120 };
    await createSandbox(cluster, ns, sandbox('sbx-runc', { ...spec, runtimeClassName: 'runc' }));
    await createSandbox(cluster, ns, sandbox('sbx-gvisor', { ...spec, runtimeClassName: GVISOR }));
    const [refused, served] = await Promise.all([
      waitForReady(cluster, ns, 'sbx-runc'),
      waitForReady(cluster, ns, 'sbx-gvisor'),
    ]);
    const s = refused.status!;
    assert.deepEqual([s.phase, s.reason], ['Failed', 'BackendError'], JSON.stringify(s));
    assert.match(s.message ?? '', /network interface eth0 .* the session was refused before it started/);
    assert.match(s.message ?? '', FIX);
    assert.equal(served.status?.phase, 'Ready', JSON.stringify(served.status));
    // It was checked, not let through: its runner was told to refuse a network.
    const pod = await cluster.core.readNamespacedPod({ namespace: ns, name: served.status?.podName ?? '' });
    assert.ok(
      pod.spec?.containers[0]?.command?.includes('--no-network'),
      JSON.stringify(pod.spec?.containers),
    );
    await cancelSandbox(cluster, ns, 'sbx-gvisor');
  });

  it("the gateway's result says why and what to configure", async () => {
    const { cluster, ns } = ops.suite;
    await bindGatewayRbac(cluster, ns);
    const backend = gatewayBackend(cluster, ns);
    try {
      const e = evaluate(RunRequestSchema.parse({ template: 'python', code: PROBE }), createPolicy({}));
      assert.ok(e.ok);
      const execution = backend.start(e.spec, {
        runId: `run-net${Date.now().toString(16).slice(-7)}`,
        principal: 'net',
      });
      const result = await execution.result;
      assert.equal(result.phase, 'Failed', JSON.stringify(result));
      assert.equal(result.reason, 'BackendError');
      assert.match(result.message ?? '', FIX);
      assert.doesNotMatch(result.stdout, /ran with/);
      await execution.cleanedUp;
    } finally {
      await backend.close();
    }
  });
});
