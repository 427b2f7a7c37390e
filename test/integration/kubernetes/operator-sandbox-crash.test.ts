// A controller killed mid-reconcile of Sandboxes and restarted converges: every Sandbox ends Ready
// with exactly one pod ever (the pod's name is deterministic, so the new controller finds what the
// old one made instead of making another).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { kubeTest } from '../../support/kube/index.js';
import { OperatorProcess, prepareNamespace } from './operator-harness.js';
import { createSandbox, sandbox, waitForReady } from './sandbox-harness.js';

describe('operator crash with Sandboxes', { timeout: 300_000 }, () => {
  test(
    'killed mid-reconcile and restarted: every Sandbox Ready, one pod each',
    { timeout: 240_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      await prepareNamespace(cluster, ns);
      // Every pod the watch ever reports, by the Sandbox UID it belongs to.
      const byUid = new Map<string, Set<string>>();
      const stopper = new AbortController();
      cluster
        .waitFor<V1Pod>(
          { path: `/api/v1/namespaces/${ns}/pods`, labelSelector: 'sandpit.dev/managed-by=sandpit-operator' },
          (pod) => {
            const uid = pod.metadata?.labels?.['sandpit.dev/session-uid'] ?? '?';
            byUid.set(uid, (byUid.get(uid) ?? new Set()).add(pod.metadata?.name ?? ''));
            return false;
          },
          { timeoutMs: 3_600_000, signal: stopper.signal },
        )
        .catch(() => undefined);
      const ops: OperatorProcess[] = [];
      let ok = false;
      try {
        const a = OperatorProcess.start(cluster, { namespace: ns, identity: 'op-sbx-crash-a' });
        ops.push(a);
        await a.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
        const names = Array.from({ length: 8 }, (_, i) => `crash-${i}`);
        await Promise.all(
          names.map((n) => createSandbox(cluster, ns, sandbox(n, { template: 'bash', ttlSeconds: 300 }))),
        );
        const deadline = Date.now() + 60_000;
        while (byUid.size === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        await a.kill('SIGKILL');
        t.diagnostic(`at the kill: pods of ${byUid.size} of ${names.length} Sandboxes`);
        assert.ok(byUid.size < names.length, 'the kill came before the controller had finished');

        const b = OperatorProcess.start(cluster, { namespace: ns, identity: 'op-sbx-crash-b' });
        ops.push(b);
        const ready = await Promise.all(names.map((n) => waitForReady(cluster, ns, n)));
        for (const s of ready) {
          assert.equal(s.status?.phase, 'Ready', `${s.metadata?.name}: ${JSON.stringify(s.status)}`);
          const uid = s.metadata?.uid ?? '';
          assert.deepEqual(
            [...(byUid.get(uid) ?? [])],
            [s.status?.podName],
            `${s.metadata?.name}: one pod ever`,
          );
          const live = await cluster.core.listNamespacedPod({
            namespace: ns,
            labelSelector: `sandpit.dev/session-uid=${uid}`,
          });
          assert.equal(live.items.length, 1);
        }
        ok = true;
      } finally {
        stopper.abort();
        for (const op of ops) {
          if (!ok) process.stderr.write(`# operator ${op.identity} log: ${op.logFile}\n`);
          await op.stop(!ok);
        }
      }
    }),
  );
});
