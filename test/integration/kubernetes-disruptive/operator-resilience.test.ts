// The operator keeps working when its apiserver goes away and when its watches expire: an
// apiserver restart, and a forced watch expiry (etcd compacted and restarted, so the apiserver's
// watch cache starts over and every watch resuming from an older resourceVersion gets 410 Gone).
// Both restart cluster components through the cluster script's own PID files and `up`, so this file
// lives in the disruptive tier (test/run.sh kube-disruptive), which runs last and alone.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { kubeTest, type KubeCluster } from '../../support/kube/index.js';
import {
  createRun,
  metricValue,
  OperatorProcess,
  prepareNamespace,
  sandboxRun,
  waitForFinished,
} from '../kubernetes/operator-harness.js';

const ETCD = 'http://127.0.0.1:2379';
const RESOURCES = ['sandboxruns', 'pods', 'configmaps', 'networkpolicies', 'runtimeclasses'];

/** Watches of the operator that ended in 410 Gone so far, all resources together. */
const expiries = (metrics: string): number =>
  RESOURCES.reduce(
    (n, resource) =>
      n + metricValue(metrics, 'sandpit_operator_watch_restarts_total', { resource, reason: 'expired' }),
    0,
  );

async function componentPid(cluster: KubeCluster, component: string): Promise<number> {
  return Number((await readFile(path.join(cluster.env.stateDir, 'run', `${component}.pid`), 'utf8')).trim());
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Kills one component the cluster script started (by its recorded PID) and has `up` restart it. */
async function restartComponent(
  cluster: KubeCluster,
  component: string,
  signal: NodeJS.Signals,
): Promise<number> {
  const pid = await componentPid(cluster, component);
  assert.ok(alive(pid), `${component} (pid ${pid}) is running`);
  process.kill(pid, signal);
  for (let i = 0; alive(pid) && i < 200; i++) await new Promise((r) => setTimeout(r, 50));
  const up = await cluster.script(['up'], { timeoutMs: 180_000 });
  assert.equal(up.code, 0, up.stderr);
  assert.match(up.stderr, new RegExp(`started ${component}`));
  return up.durationMs;
}

async function succeeds(cluster: KubeCluster, ns: string, name: string, text: string): Promise<void> {
  await createRun(cluster, ns, sandboxRun(name, { template: 'bash', code: `echo ${text}` }));
  const run = await waitForFinished(cluster, ns, name, 120_000);
  assert.equal(run.status?.phase, 'Succeeded', JSON.stringify(run.status));
  assert.equal(run.status?.output?.tail, `${text}\n`);
}

async function waitForMetric(
  op: OperatorProcess,
  check: (text: string) => boolean,
  timeoutMs: number,
  what: string,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await op.metrics();
    if (check(text)) return text;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

describe('operator resilience (restarts cluster components)', { timeout: 600_000 }, () => {
  test(
    'after an apiserver restart, a run created afterwards succeeds without restarting the operator',
    { timeout: 300_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      await prepareNamespace(cluster, ns);
      const op = OperatorProcess.start(cluster, { namespace: ns, identity: 'op-restart' });
      let ok = false;
      try {
        await op.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
        await succeeds(cluster, ns, 'before', 'before-restart');
        const took = await restartComponent(cluster, 'kube-apiserver', 'SIGKILL');
        t.diagnostic(`apiserver killed and restarted by up in ${Math.round(took)} ms`);
        await succeeds(cluster, ns, 'after', 'after-restart');
        assert.ok(op.running, 'the same operator process');
        // While the apiserver was away the Lease could not be renewed: the controller paused, then took it back.
        const leases = op.lines.filter((l) => String(l.msg).includes('Lease'));
        t.diagnostic(`lease: ${leases.map((l) => l.msg).join(' → ')}`);
        assert.equal(op.lines.filter((l) => l.msg === 'Started operator').length, 1);
        const restarts = metricValue(await op.metrics(), 'sandpit_operator_watch_restarts_total', {
          resource: 'sandboxruns',
          reason: 'error',
        });
        t.diagnostic(`watch restarts on errors (sandboxruns): ${restarts}`);
        ok = true;
      } finally {
        await op.stop(!ok);
        if (!ok) t.diagnostic(`operator log: ${op.logFile}`);
      }
    }),
  );

  test(
    'after a forced watch expiry (410 Gone), a run created afterwards succeeds without restarting the operator',
    { timeout: 300_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      await prepareNamespace(cluster, ns);
      const op = OperatorProcess.start(cluster, { namespace: ns, identity: 'op-expiry' });
      let ok = false;
      try {
        await op.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
        await succeeds(cluster, ns, 'before', 'before-expiry');
        const expiredBefore = expiries(await op.metrics());
        // Move etcd past every resourceVersion the operator has seen, then compact it at its current
        // revision (read just before, so that no later write keeps a watch from hitting the compaction).
        await cluster.core.createNamespacedConfigMap({
          namespace: ns,
          body: { metadata: { name: 'revision-marker' } },
        });
        const range = await fetch(`${ETCD}/v3/kv/range`, {
          method: 'POST',
          body: JSON.stringify({ key: 'AA==' }),
        });
        const revision = ((await range.json()) as { header: { revision: string } }).header.revision;
        const compact = await fetch(`${ETCD}/v3/kv/compaction`, {
          method: 'POST',
          body: JSON.stringify({ revision, physical: true }),
        });
        assert.equal(compact.status, 200, await compact.text());
        // etcd's restart breaks the apiserver's own watches; resuming them hits the compaction, so its
        // watch cache re-lists and ends every client watch, which then resumes from a compacted version.
        await restartComponent(cluster, 'etcd', 'SIGTERM');
        // Which watches expire depends on which of the apiserver's own etcd watches hit the compaction
        // (a write to a resource after it resumes that watch past it); at least one must, and recover.
        const text = await waitForMetric(
          op,
          (m) => expiries(m) > expiredBefore,
          90_000,
          'a watch to expire (410) and re-list',
        );
        t.diagnostic(
          `watch expiries (410): ${RESOURCES.map((r) => `${r}=${metricValue(text, 'sandpit_operator_watch_restarts_total', { resource: r, reason: 'expired' })}`).join(' ')}`,
        );
        await succeeds(cluster, ns, 'after', 'after-expiry');
        assert.ok(op.running, 'the same operator process');
        ok = true;
      } finally {
        await op.stop(!ok);
        if (!ok) t.diagnostic(`operator log: ${op.logFile}`);
      }
    }),
  );
});
