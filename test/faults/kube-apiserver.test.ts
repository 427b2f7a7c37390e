// The API server restarted, and watches expired with 410 Gone, while a run made through the
// gateway is in flight: the operator (the same process throughout) and the gateway's watch of the
// run recover, the run finishes with its whole output, a run made after finishes too, and nothing
// is left after the TTL. Restarts cluster components (kube-apiserver, etcd) through the cluster
// script's PID files and `up`: run it alone, under the lock, after the other Kubernetes tiers.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import type { RunResult } from '../../src/api/run.js';
import { type KubeCluster } from '../support/kube/index.js';
import { failureMarkingTest, metricValue } from '../integration/kubernetes/operator-harness.js';
import { OUTAGE_TTL_SECONDS, startKubeFaults, type GatewayRun, type KubeFaults } from './kube-harness.js';

const ETCD = 'http://127.0.0.1:2379';
/** The operator's watches (sandpit_operator_watch_restarts_total's resource label). */
const RESOURCES = ['sandboxruns', 'pods', 'configmaps', 'networkpolicies', 'runtimeclasses'];

const expired = (metrics: string, resource: string): number =>
  metricValue(metrics, 'sandpit_operator_watch_restarts_total', { resource, reason: 'expired' });

/** A program that prints `first`, sleeps, then prints `second`: in flight while the fault happens. */
const inFlight = (first: string, second: string): { template: string; code: string } => ({
  template: 'python',
  code: `import time\nprint("${first}", flush=True)\ntime.sleep(2)\nprint("${second}")`,
});

/**
 * Waits (up to 60 s) until no namespace is being deleted: the writes of a finished test's
 * clean-up would move the apiserver's watches past the compaction, and slow the restart.
 */
async function quiet(cluster: KubeCluster, diagnostic: (s: string) => void): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ending = (await cluster.core.listNamespace()).items.filter(
      (n) => n.status?.phase === 'Terminating',
    );
    if (ending.length === 0) return;
    if (Date.now() > deadline) {
      diagnostic(`still terminating: ${ending.map((n) => n.metadata?.name).join(', ')}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * Stops a component by its recorded PID, and has the cluster script's `up` start it again. Returns
 * how long that took, and what `up` said (its lines are timed: where a slow restart went).
 */
async function restart(
  cluster: KubeCluster,
  component: string,
  signal: NodeJS.Signals,
): Promise<{ ms: number; said: string[] }> {
  const started = performance.now();
  await cluster.stopComponent(component, signal);
  const up = await cluster.script(['up'], { timeoutMs: 180_000 });
  assert.equal(up.code, 0, up.stderr);
  assert.match(up.stderr, new RegExp(`started ${component}`));
  return { ms: performance.now() - started, said: up.stderr.split('\n').filter(Boolean) };
}

/** The gateway's log lines saying it re-opened its watch of this run. */
const watchRestarts = (f: KubeFaults, run: GatewayRun): string[] =>
  f.gatewayLog
    .filter((l) => l.msg === 'Re-opened the watch of SandboxRun' && l.run === `${f.ns}/${run.runId}`)
    .map((l) => String(l.reason));

function finished(r: RunResult, stdout: string): void {
  assert.equal(r.phase, 'Succeeded', `${r.runId}: ${JSON.stringify(r)}`);
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, stdout, `${r.runId}: its whole output`);
}

describe(
  'faults: the Kubernetes API server restarted, and watches expired (410 Gone)',
  { timeout: 600_000 },
  () => {
    let f: KubeFaults;
    let failed = false;
    const it = failureMarkingTest(180_000, () => (failed = true));

    before(async () => {
      f = await startKubeFaults('faults-apiserver', OUTAGE_TTL_SECONDS);
    });
    after(async () => {
      // Whatever happened, the cluster is left whole for whoever takes the lock next.
      if (f && (await f.cluster.script(['status'])).code !== 0) {
        const up = await f.cluster.script(['up'], { timeoutMs: 300_000 });
        process.stderr.write(`# cluster up after the faults: exit ${up.code}\n${up.stderr}`);
      }
      await f?.stop(failed);
    });

    it('the apiserver killed (SIGKILL) and restarted mid-run: the run finishes with its whole output; the operator and the gateway carry on; nothing is left running', async (t) => {
      await quiet(f.cluster, (s) => t.diagnostic(s));
      const run = await f.run(inFlight('before', 'after'));
      await run.saw('before\n');
      const took = await restart(f.cluster, 'kube-apiserver', 'SIGKILL');
      t.diagnostic(`apiserver killed and up again in ${Math.round(took.ms)} ms: ${took.said.join(' | ')}`);
      const next = await f.run({ template: 'bash', code: 'echo after-restart' });
      const [r1, r2] = await f.results([run, next]);
      finished(r1!, 'before\nafter\n');
      finished(r2!, 'after-restart\n');
      // The gateway's watch of the run broke with the apiserver and was opened again.
      const restarts = watchRestarts(f, run);
      t.diagnostic(`gateway watch of the run re-opened: ${restarts.join(', ')}`);
      assert.ok(
        restarts.some((r) => r === 'error' || r === 'expired'),
        `the gateway's watch of the run broke and was re-opened (${restarts.join(', ') || 'never'})`,
      );
      assert.ok(f.operator.running, 'the same operator process');
      assert.equal(f.operator.lines.filter((l) => l.msg === 'Started operator').length, 1);
      const leases = f.operator.lines.filter((l) => String(l.msg).includes('Lease')).map((l) => l.msg);
      t.diagnostic(`operator lease: ${leases.join(' → ')}`);
      // Their pods have ended; their records go with the TTL, which runs out during the next case (checked there).
      await f.expectNothingRunning([run, next]);
    });

    it('a watch expired with 410 Gone (etcd compacted past its resourceVersion, then restarted): the operator and the gateway re-list; the run in flight and a run after finish; nothing is left after the TTL', async (t) => {
      await quiet(f.cluster, (s) => t.diagnostic(s));
      const before = await f.operator.metrics();
      const run = await f.run(inFlight('x', 'y'));
      await run.saw('x\n');
      // Two writes after the last event of every watched resource, then a compaction at the current
      // revision: the apiserver's own etcd watches can no longer resume, so its watch caches re-list
      // and end every watch, whose resourceVersion is now older than anything it can serve.
      for (const name of ['marker-1', 'marker-2'])
        await f.cluster.core.createNamespacedConfigMap({ namespace: f.ns, body: { metadata: { name } } });
      const range = await fetch(`${ETCD}/v3/kv/range`, {
        method: 'POST',
        body: JSON.stringify({ key: 'AA==' }),
      });
      const { revision } = ((await range.json()) as { header: { revision: string } }).header;
      const compact = await fetch(`${ETCD}/v3/kv/compaction`, {
        method: 'POST',
        body: JSON.stringify({ revision, physical: true }),
      });
      assert.equal(compact.status, 200, await compact.text());
      const took = await restart(f.cluster, 'etcd', 'SIGTERM');
      t.diagnostic(
        `etcd compacted at revision ${revision}, stopped and up again in ${Math.round(took.ms)} ms: ${took.said.join(' | ')}`,
      );
      const next = await f.run({ template: 'bash', code: 'echo after-expiry' });
      const [r1, r2] = await f.results([run, next]);
      finished(r1!, 'x\ny\n');
      finished(r2!, 'after-expiry\n');

      const metrics = await f.operator.metrics();
      t.diagnostic(
        `operator watches expired (410): ${RESOURCES.map((r) => `${r} +${expired(metrics, r) - expired(before, r)}`).join(' ')}`,
      );
      assert.ok(
        expired(metrics, 'sandboxruns') > expired(before, 'sandboxruns'),
        "the operator's SandboxRun watch expired (410) and re-listed",
      );
      const restarts = watchRestarts(f, run);
      t.diagnostic(`gateway watch of the run re-opened: ${restarts.join(', ')}`);
      assert.ok(
        restarts.includes('expired'),
        "the gateway's watch of the run expired (410) and read it afresh",
      );
      assert.ok(f.operator.running, 'the same operator process');
      await f.expectNothingRunning([run, next]);
      // Every run of this file (the previous case's too): gone after the TTL.
      const cleaned = await f.expectNothingLeft(f.runs);
      t.diagnostic(`nothing left ${Math.round(cleaned)} ms after the results (TTL ${f.ttlSeconds} s)`);
    });
  },
);
