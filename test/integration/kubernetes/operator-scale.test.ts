// 50 SandboxRuns applied at once on a 2-CPU node: all finish with the right status, none lost,
// none duplicated (one pod each, ever). Prints the time to finish all 50.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditOf } from '../../support/audit.js';
import { kubeTest } from '../../support/kube/index.js';
import {
  createRun,
  metricValue,
  OperatorProcess,
  prepareNamespace,
  recordPods,
  sandboxRun,
  waitForFinished,
} from './operator-harness.js';

const RUNS = 50;

describe('operator at scale', { timeout: 900_000 }, () => {
  test(
    `${RUNS} SandboxRuns at once: all finish with correct status, none lost, none duplicated`,
    { timeout: 600_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      await prepareNamespace(cluster, ns);
      const pods = recordPods(cluster, ns);
      const op = OperatorProcess.start(cluster, { namespace: ns, identity: 'op-scale' });
      let ok = false;
      try {
        await op.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
        const names = Array.from({ length: RUNS }, (_, i) => `scale-${String(i).padStart(2, '0')}`);
        // Every other run fails on purpose, so a status mix-up between runs cannot go unnoticed.
        const code = (i: number): string =>
          `import sys\nprint('run ${i}')\nsys.exit(${i % 2 === 0 ? 0 : (i % 7) + 1})`;
        const started = performance.now();
        await Promise.all(
          names.map((n, i) => createRun(cluster, ns, sandboxRun(n, { template: 'python', code: code(i) }))),
        );
        const created = performance.now();
        const seenFinished = new Map<string, number>();
        const runs = await Promise.all(
          names.map(async (n) => {
            const run = await waitForFinished(cluster, ns, n, 480_000);
            seenFinished.set(run.metadata?.uid ?? '', performance.now());
            return run;
          }),
        );
        const finished = performance.now();
        for (const [i, run] of runs.entries()) {
          const want = i % 2 === 0 ? 0 : (i % 7) + 1;
          assert.equal(run.status?.exitCode, want, `${run.metadata?.name}: ${JSON.stringify(run.status)}`);
          assert.equal(run.status?.phase, want === 0 ? 'Succeeded' : 'Failed');
          assert.equal(run.status?.reason, want === 0 ? 'Completed' : 'Error');
          assert.equal(run.status?.output?.tail, `run ${i}\n`);
          assert.deepEqual(
            [...(pods.byRun.get(run.metadata?.uid ?? '') ?? [])],
            [run.status?.podName],
            `${run.metadata?.name}: one pod`,
          );
        }
        assert.equal(pods.byRun.size, RUNS, 'one pod per run, no strays');
        const live = await cluster.core.listNamespacedPod({
          namespace: ns,
          labelSelector: 'sandpit.dev/managed-by=sandpit-operator',
        });
        assert.equal(live.items.length, RUNS);
        const metrics = await op.metrics();
        const audits = op.lines.filter((l) => auditOf(l)?.event === 'run').length;
        assert.equal(audits, RUNS, 'one audit record per run');
        const total = (finished - started) / 1000;
        const conflicts = metricValue(metrics, 'sandpit_operator_reconciles_total', { result: 'conflict' });
        const errors = metricValue(metrics, 'sandpit_operator_reconciles_total', { result: 'error' });
        const passes = ['success', 'requeue', 'conflict', 'error'].reduce(
          (n, result) => n + metricValue(metrics, 'sandpit_operator_reconciles_total', { result }),
          0,
        );
        const startTimes = runs
          .map(
            (r) =>
              (Date.parse(r.status!.startTime!) - Date.parse(String(r.metadata?.creationTimestamp))) / 1000,
          )
          .sort((a, b) => a - b);
        const lastExit =
          Math.max(...runs.map((r) => Date.parse(r.status!.completionTime!))) -
          Date.parse(String(runs[0]!.metadata?.creationTimestamp));
        const lastPodFinished = (Math.max(...pods.finishedAt.values()) - started) / 1000;
        const lags = runs
          .map(
            (r) =>
              (seenFinished.get(r.metadata?.uid ?? '')! -
                (pods.finishedAt.get(r.metadata?.uid ?? '') ?? NaN)) /
              1000,
          )
          .sort((a, b) => a - b);
        const summary =
          `${RUNS} runs: created in ${((created - started) / 1000).toFixed(1)} s, all finished ${total.toFixed(1)} s after the first create; ` +
          `creation→running p50 ${startTimes[Math.floor(RUNS / 2)]} s, max ${startTimes[RUNS - 1]} s; ` +
          `last program exit ${(lastExit / 1000).toFixed(0)} s after the first creation (container times have 1 s resolution), ` +
          `last pod seen finished by the apiserver at ${lastPodFinished.toFixed(1)} s; ` +
          `pod finished → run status finished p50 ${lags[Math.floor(RUNS / 2)]!.toFixed(2)} s, max ${lags[RUNS - 1]!.toFixed(2)} s; ` +
          `${passes} reconcile passes (${conflicts} conflicts, ${errors} errors)`;
        t.diagnostic(summary);
        process.stderr.write(`# ${summary}\n`);
        ok = true;
      } finally {
        pods.stop();
        await op.stop(!ok);
        if (!ok) t.diagnostic(`operator log: ${op.logFile}`);
      }
    }),
  );
});
