// Replicas: with two controllers only the Lease holder reconciles, and killing it hands over; a
// clean shutdown hands over at once. (A controller killed mid-reconcile and restarted is a case of
// the faults tier: test/faults/kube-operator-killed.test.ts.)
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { CoreV1Event, V1Lease } from '@kubernetes/client-node';
import { kubeTest } from '../../support/kube/index.js';
import {
  createRun,
  metricValue,
  OperatorProcess,
  prepareNamespace,
  sandboxRun,
  waitForFinished,
  acquiredLease,
  leaderOf,
} from './operator-harness.js';
import type { SandboxRun } from '../../../src/api/v1alpha1/sandboxrun.js';

const LEASE_SECONDS = 6;
const RETRY_SECONDS = 1;

async function stopAll(ops: OperatorProcess[], keepLogs: boolean): Promise<void> {
  for (const op of ops) {
    if (keepLogs) process.stderr.write(`# operator ${op.identity} log: ${op.logFile}\n`);
    await op.stop(keepLogs);
  }
}

describe('operator replicas', { timeout: 600_000 }, () => {
  test(
    'two controllers: only the Lease holder acts; killing it hands over within the lease',
    { timeout: 240_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      await prepareNamespace(cluster, ns);
      const ops = [
        OperatorProcess.start(cluster, { namespace: ns, identity: 'op-one' }),
        OperatorProcess.start(cluster, { namespace: ns, identity: 'op-two' }),
      ];
      let ok = false;
      try {
        const { leader, standby } = await leaderOf(ops);

        const names = ['ha-0', 'ha-1', 'ha-2'];
        await Promise.all(
          names.map((n) => createRun(cluster, ns, sandboxRun(n, { template: 'bash', code: 'echo ok' }))),
        );
        for (const n of names)
          assert.equal((await waitForFinished(cluster, ns, n, 60_000)).status?.phase, 'Succeeded');

        assert.ok(!acquiredLease(standby), 'the standby never held the Lease');
        assert.equal(
          standby.find((l) => l.msg === 'Synced caches'),
          undefined,
          'the standby never started its controller',
        );
        const standbyMetrics = await standby.metrics();
        assert.equal(metricValue(standbyMetrics, 'sandpit_operator_leader'), 0);
        for (const result of ['success', 'requeue', 'conflict', 'error']) {
          assert.equal(metricValue(standbyMetrics, 'sandpit_operator_reconciles_total', { result }), 0);
        }
        assert.equal(metricValue(await leader.metrics(), 'sandpit_operator_leader'), 1);
        const events = (await cluster.core.listNamespacedEvent({ namespace: ns })).items.filter(
          (e: CoreV1Event) => e.involvedObject.kind === 'SandboxRun',
        );
        assert.ok(events.length >= names.length);
        assert.ok(
          events.every((e) => e.reportingInstance === leader.identity),
          'every Event came from the leader',
        );

        const lease = await cluster.objects.read<V1Lease>({
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: 'sandpit-operator', namespace: ns },
        });
        assert.equal(lease.spec?.holderIdentity, leader.identity);

        const killedAt = Date.now();
        await leader.kill('SIGKILL');
        await standby.waitForLog(
          (l) => l.msg === 'Acquired Lease',
          (LEASE_SECONDS + 5) * 1000,
          'the standby to take the Lease',
        );
        const handover = (Date.now() - killedAt) / 1000;
        t.diagnostic(
          `hand-over after SIGKILL of the leader: ${handover.toFixed(2)} s (lease ${LEASE_SECONDS} s, retry ${RETRY_SECONDS} s)`,
        );
        // The standby waits out the lease from the last renewal it saw (≤ one retry before the kill),
        // then takes it at its next try: at most lease + 2 retries (with jitter) after the kill.
        assert.ok(
          handover <= LEASE_SECONDS + 2 * RETRY_SECONDS * 1.2 + 0.5,
          `hand-over took ${handover.toFixed(2)} s`,
        );
        assert.ok(
          handover >= LEASE_SECONDS - 2 * RETRY_SECONDS,
          `hand-over after ${handover.toFixed(2)} s: too early`,
        );

        await standby.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'the new leader synced');
        await createRun(
          cluster,
          ns,
          sandboxRun('after-handover', { template: 'bash', code: 'echo still here' }),
        );
        const run: SandboxRun = await waitForFinished(cluster, ns, 'after-handover', 60_000);
        assert.equal(run.status?.phase, 'Succeeded');
        assert.equal(run.status?.output?.tail, 'still here\n');
        ok = true;
      } finally {
        await stopAll(ops, !ok);
      }
    }),
  );

  test(
    'a clean shutdown (SIGTERM) drains, releases the Lease, and the standby takes over at once',
    { timeout: 120_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      await prepareNamespace(cluster, ns);
      const first = OperatorProcess.start(cluster, { namespace: ns, identity: 'op-first' });
      const ops = [first];
      let ok = false;
      try {
        await first.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'first synced');
        const second = OperatorProcess.start(cluster, { namespace: ns, identity: 'op-second' });
        ops.push(second);
        await second.waitForLog((l) => l.msg === 'Started operator', 30_000, 'second started');
        for (const op of ops) {
          const base = await op.probesUrl();
          for (const probe of ['/healthz', '/readyz'])
            assert.equal((await fetch(base + probe)).status, 200, `${op.identity} ${probe}`);
          assert.match(await op.metrics(), /^sandpit_operator_leader[{ ]/m);
        }
        const stoppedAt = Date.now();
        assert.equal(await first.kill('SIGTERM'), 0, 'a clean exit');
        assert.ok(first.find((l) => l.msg === 'Released Lease'));
        await second.waitForLog((l) => l.msg === 'Acquired Lease', 10_000, 'the standby to take the Lease');
        const handover = (Date.now() - stoppedAt) / 1000;
        t.diagnostic(`hand-over after SIGTERM of the leader: ${handover.toFixed(2)} s`);
        assert.ok(handover <= 2 * RETRY_SECONDS * 1.2 + 1.5, `hand-over took ${handover.toFixed(2)} s`);
        await second.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'the new leader synced');
        await createRun(cluster, ns, sandboxRun('after-sigterm', { template: 'bash', code: 'echo ok' }));
        assert.equal(
          (await waitForFinished(cluster, ns, 'after-sigterm', 60_000)).status?.phase,
          'Succeeded',
        );
        ok = true;
      } finally {
        await stopAll(ops, !ok);
      }
    }),
  );
});
