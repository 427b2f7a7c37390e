// The pending outcomes the other files do not reach, on the real cluster: a pod no node can take
// (Unschedulable) and a pod the namespace's ResourceQuota refuses (QuotaExceeded). Each ends
// Failed with its reason at pendingTimeoutSeconds (as late as the operator's reaction allows), and
// leaves no pod behind.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { V1Pod, V1ResourceQuota } from '@kubernetes/client-node';
import {
  createTimed,
  lateBy,
  sandboxRun,
  secondsToComplete,
  operatorSuite,
  podsOf,
  waitForFinished,
  type Suite,
} from './operator-harness.js';
import type { SandboxRun } from '../../../src/api/v1alpha1/sandboxrun.js';

const PENDING_TIMEOUT_SECONDS = 8;
/** More CPU than the single test node has: the scheduler can place the pod nowhere. */
const TOO_MANY_CPUS = '64';

/** Creates the run, checks the Started condition names `reason` while pending, and returns the finished run. */
async function pendsThenFails(
  s: Suite,
  name: string,
  reason: string,
  spec: Parameters<typeof sandboxRun>[1],
): Promise<{ run: SandboxRun }> {
  const { cluster, ns } = s;
  const reactionMs = await createTimed(
    cluster,
    ns,
    sandboxRun(name, { ...spec, pendingTimeoutSeconds: PENDING_TIMEOUT_SECONDS }),
  );
  const pending = await cluster.waitFor<SandboxRun>(
    { path: `/apis/sandpit.dev/v1alpha1/namespaces/${ns}/sandboxruns`, name },
    (r) =>
      r.status?.conditions?.some((c) => c.type === 'Started' && c.reason === reason) === true ||
      (r.status?.phase !== undefined && r.status.phase !== 'Pending'),
    { timeoutMs: 30_000, description: `SandboxRun ${name} to wait with reason ${reason}` },
  );
  assert.equal(pending.status?.phase, 'Pending', JSON.stringify(pending.status));
  const run = await waitForFinished(cluster, ns, name, 60_000);
  const took = secondsToComplete(run);
  assert.equal(run.status?.phase, 'Failed', JSON.stringify(run.status));
  assert.equal(run.status?.reason, reason);
  assert.ok(
    took >= PENDING_TIMEOUT_SECONDS && took <= PENDING_TIMEOUT_SECONDS + lateBy(reactionMs),
    `took ${took.toFixed(1)} s (the operator's first reaction: ${reactionMs.toFixed(0)} ms)`,
  );
  return { run };
}

describe('SandboxRuns that cannot start, on the real cluster', { timeout: 300_000 }, () => {
  const ops = operatorSuite('operator-pending', {
    sandbox: { maxCpu: TOO_MANY_CPUS },
    operator: { cpuRequest: TOO_MANY_CPUS },
  });
  const { it } = ops;

  it('a pod no node can take: Failed/Unschedulable, and its pod deleted', async () => {
    const { run } = await pendsThenFails(ops.suite, 'unschedulable', 'Unschedulable', {
      template: 'python',
      code: 'print(1)',
      resources: { cpu: TOO_MANY_CPUS },
    });
    await ops.suite.cluster
      .waitFor<V1Pod>(
        { path: `/api/v1/namespaces/${ops.suite.ns}/pods`, name: run.status?.podName },
        (_p, type) => type === 'DELETED',
        { timeoutMs: 30_000, description: 'the unschedulable pod to be deleted' },
      )
      .catch(async (e: unknown) => {
        if ((await podsOf(ops.suite, run)).length > 0) throw e; // already gone is fine too
      });
  });

  // Runs after the test above: from here on, the namespace admits no pod at all.
  it('a pod the ResourceQuota refuses: Failed/QuotaExceeded, and no pod', async () => {
    const { cluster, ns } = ops.suite;
    const quota: V1ResourceQuota = {
      metadata: { name: 'no-pods' },
      spec: { hard: { pods: '0' } },
    };
    await cluster.core.createNamespacedResourceQuota({ namespace: ns, body: quota });
    // Quota admission refuses everything ("status unknown") until the quota controller has counted.
    await cluster.waitFor<V1ResourceQuota>(
      { path: `/api/v1/namespaces/${ns}/resourcequotas`, name: 'no-pods' },
      (q) => q.status?.hard?.pods === '0',
      { timeoutMs: 30_000, description: 'the ResourceQuota to be counted' },
    );
    const { run } = await pendsThenFails(ops.suite, 'over-quota', 'QuotaExceeded', {
      template: 'python',
      code: 'print(1)',
    });
    assert.match(run.status?.message ?? '', /exceeded quota/);
    assert.deepEqual(await podsOf(ops.suite, run), []);
  });
});
