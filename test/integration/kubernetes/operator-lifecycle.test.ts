// What happens around a run: deleting it garbage-collects its children (owner references, collected
// by the real kube-controller-manager), TTL deletes finished runs, and the operator restores what
// is taken from a running run (level-triggered: it reconciles state, not events).
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { KubernetesObject, V1NetworkPolicy } from '@kubernetes/client-node';
import { pollUntil } from '../../../src/shared/time.js';
import {
  createRun,
  createTimed,
  customApi,
  getRun,
  lateBy,
  sandboxRun,
  operatorSuite,
  waitForFinished,
  waitForPhase,
  type Suite,
} from './operator-harness.js';
import type { SandboxRun } from '../../../src/api/v1alpha1/sandboxrun.js';

const KINDS = [
  { path: 'pods', apiVersion: 'v1', kind: 'Pod' },
  { path: 'configmaps', apiVersion: 'v1', kind: 'ConfigMap' },
  { path: 'networkpolicies', apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' },
] as const;

/** The run's children still present (by its UID label). */
async function children(s: Suite, run: SandboxRun): Promise<string[]> {
  const selector = `sandpit.dev/run-uid=${run.metadata?.uid}`;
  const found: string[] = [];
  for (const k of KINDS) {
    const list = await s.cluster.objects.list<KubernetesObject>(
      k.apiVersion,
      k.kind,
      s.ns,
      undefined,
      undefined,
      undefined,
      undefined,
      selector,
    );
    for (const item of list.items) {
      const deleting = item.metadata?.deletionTimestamp;
      const phase = (item as { status?: { phase?: string } }).status?.phase;
      const state = [phase, deleting && `deleting since ${String(deleting)}`].filter(Boolean).join(', ');
      found.push(`${k.kind}/${item.metadata?.name}${state ? ` (${state})` : ''}`);
    }
  }
  return found;
}

/** Waits until the run's children are gone; a timeout names those left and their state. */
async function waitChildrenGone(s: Suite, run: SandboxRun, timeoutMs: number): Promise<void> {
  let left: string[] = [];
  const gone = await pollUntil(async () => (left = await children(s, run)).length === 0, {
    intervalMs: 250,
    timeoutMs,
  });
  if (!gone)
    throw new Error(
      `timed out after ${timeoutMs} ms: children of ${run.metadata?.name} left: ${left.join(', ')}`,
    );
}

describe('SandboxRun lifecycle on the real cluster', { concurrency: true, timeout: 300_000 }, () => {
  const ops = operatorSuite('operator-lifecycle');
  const { it } = ops;

  it('deleting a finished run garbage-collects its Pod, ConfigMap and NetworkPolicy', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(cluster, ns, sandboxRun('gc-finished', { template: 'python', code: 'print(1)' }));
    const run = await waitForFinished(cluster, ns, 'gc-finished', 60_000);
    assert.equal(run.status?.phase, 'Succeeded');
    assert.deepEqual((await children(ops.suite, run)).map((c) => c.split('/')[0]).sort(), [
      'ConfigMap',
      'NetworkPolicy',
      'Pod',
    ]);
    await customApi(cluster).deleteNamespacedCustomObject({
      group: 'sandpit.dev',
      version: 'v1alpha1',
      plural: 'sandboxruns',
      namespace: ns,
      name: 'gc-finished',
    });
    await waitChildrenGone(ops.suite, run, 60_000);
  });

  it('deleting a running run stops it: its pod is collected too', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('gc-running', {
        template: 'python',
        code: 'import time\ntime.sleep(25)',
        timeoutSeconds: 30,
      }),
    );
    const run = await waitForPhase(cluster, ns, 'gc-running', 'Running', 60_000);
    await customApi(cluster).deleteNamespacedCustomObject({
      group: 'sandpit.dev',
      version: 'v1alpha1',
      plural: 'sandboxruns',
      namespace: ns,
      name: 'gc-running',
    });
    await waitChildrenGone(ops.suite, run, 60_000);
  });

  it('ttlSecondsAfterFinished deletes the finished run (and so its children)', async () => {
    const { cluster, ns } = ops.suite;
    const ttl = 3;
    const reactionMs = await createTimed(
      cluster,
      ns,
      sandboxRun('ttl', { template: 'python', code: 'print(1)', ttlSecondsAfterFinished: ttl }),
    );
    const run = await waitForFinished(cluster, ns, 'ttl', 60_000);
    const finishedAt = Date.now();
    // Polled, not watched: on a loaded machine the run may already be gone by the time a watch opens.
    const deleted = await pollUntil(async () => (await getRun(cluster, ns, 'ttl')) === undefined, {
      intervalMs: 100,
      timeoutMs: 30_000,
    });
    assert.ok(deleted, 'the run is deleted by its TTL within 30 s');
    const waited = (Date.now() - finishedAt) / 1000;
    assert.ok(
      waited <= ttl + lateBy(reactionMs),
      `deleted ${waited.toFixed(1)} s after it finished (the operator's first reaction: ${reactionMs.toFixed(0)} ms)`,
    );
    await waitChildrenGone(ops.suite, run, 60_000);
  });

  it('a NetworkPolicy deleted from a running run is put back', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('np-restore', {
        template: 'python',
        code: 'import time\ntime.sleep(20)',
        timeoutSeconds: 30,
      }),
    );
    const run = await waitForPhase(cluster, ns, 'np-restore', 'Running', 60_000);
    const name = run.status?.podName ?? '';
    const first = await cluster.objects.read<V1NetworkPolicy>({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name, namespace: ns },
    });
    await cluster.objects.delete({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name, namespace: ns },
    });
    const back = await cluster.waitFor<V1NetworkPolicy>(
      { path: `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies`, name },
      (np, type) => type !== 'DELETED' && np.metadata?.uid !== first.metadata?.uid,
      { timeoutMs: 15_000, description: 'the NetworkPolicy to be recreated' },
    );
    assert.deepEqual(back.spec?.policyTypes, ['Ingress', 'Egress']);
    await customApi(cluster).patchNamespacedCustomObject({
      group: 'sandpit.dev',
      version: 'v1alpha1',
      plural: 'sandboxruns',
      namespace: ns,
      name: 'np-restore',
      body: [{ op: 'add', path: '/spec/cancel', value: true }],
    });
  });

  it('a pod deleted under a running run: the run fails (BackendError), it is not silently re-run', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('pod-lost', { template: 'python', code: 'import time\ntime.sleep(25)', timeoutSeconds: 30 }),
    );
    const running = await waitForPhase(cluster, ns, 'pod-lost', 'Running', 60_000);
    await cluster.core.deleteNamespacedPod({
      namespace: ns,
      name: running.status?.podName ?? '',
      gracePeriodSeconds: 0,
    });
    const run = await waitForFinished(cluster, ns, 'pod-lost', 60_000);
    // Either the operator saw the pod vanish (BackendError), or the kubelet reported it killed first (Error, 137).
    assert.equal(run.status?.phase, 'Failed', JSON.stringify(run.status));
    assert.ok(['BackendError', 'Error'].includes(run.status?.reason ?? ''), JSON.stringify(run.status));
    const pods = (
      await cluster.core.listNamespacedPod({
        namespace: ns,
        labelSelector: `sandpit.dev/run-uid=${run.metadata?.uid}`,
      })
    ).items;
    assert.ok(
      pods.every((p) => p.metadata?.deletionTimestamp),
      'no second pod',
    );
  });
});
