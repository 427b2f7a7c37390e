/**
 * Many SandboxRuns made at once in one namespace, reconciled by one operator process: all finish
 * with their own status and output, none is lost, none is duplicated (one pod each, ever), and
 * each has one audit record. Every other run fails on purpose, so that a status mix-up between runs
 * cannot go unnoticed. The kube tier runs 50 (operator-scale.test.ts); the load tier 100, then
 * waits for their TTL to remove everything (test/load/kube-runs.test.ts).
 */
import assert from 'node:assert/strict';
import type { SandboxRun } from '../../../src/api/v1alpha1/sandboxrun.js';
import { auditOf } from '../../support/audit.js';
import type { KubeTestContext } from '../../support/kube/index.js';
import { eventually } from '../../support/sessions.js';
import {
  createRun,
  metricValue,
  OperatorProcess,
  prepareNamespace,
  recordPods,
  sandboxRun,
  waitForFinished,
} from './operator-harness.js';

export interface AtOnce {
  /** The finished runs, in the order they were made. */
  runs: SandboxRun[];
  /** Seconds from the first create until every run was seen finished. */
  allFinishedSeconds: number;
  /** A line of figures: creation, start and finish times, reconcile passes. */
  summary: string;
  /** Stops the operator (call when done; `failed` keeps its log). */
  stop(failed: boolean): Promise<void>;
}

export async function runsAtOnce(
  { cluster, ns }: Omit<KubeTestContext, 't'>,
  count: number,
  options: { ttlSecondsAfterFinished?: number } = {},
): Promise<AtOnce> {
  await prepareNamespace(cluster, ns);
  const pods = recordPods(cluster, ns);
  const op = OperatorProcess.start(cluster, { namespace: ns, identity: 'op-scale' });
  const stop = async (failed: boolean): Promise<void> => {
    pods.stop();
    await op.stop(failed);
  };
  try {
    await op.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
    const width = String(count - 1).length;
    const names = Array.from({ length: count }, (_, i) => `scale-${String(i).padStart(width, '0')}`);
    const code = (i: number): string =>
      `import sys\nprint('run ${i}')\nsys.exit(${i % 2 === 0 ? 0 : (i % 7) + 1})`;
    const ttl = options.ttlSecondsAfterFinished;
    const started = performance.now();
    await Promise.all(
      names.map((n, i) =>
        createRun(
          cluster,
          ns,
          sandboxRun(n, {
            template: 'python',
            code: code(i),
            ...(ttl !== undefined ? { ttlSecondsAfterFinished: ttl } : {}),
          }),
        ),
      ),
    );
    const created = performance.now();
    const seenFinished = new Map<string, number>();
    const runs = await Promise.all(
      names.map(async (n) => {
        const run = await waitForFinished(cluster, ns, n, 900_000);
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
    assert.equal(pods.byRun.size, count, 'one pod per run, no strays');
    // A run's record is written after its finished status, and reaches this process through the
    // operator's log: so wait for the last of them, then count.
    const audits = (): number => op.lines.filter((l) => auditOf(l)?.event === 'run').length;
    await eventually(() => audits() >= count, 30_000);
    assert.equal(audits(), count, 'one audit record per run');

    const metrics = await op.metrics();
    const reconciles = (result: string): number =>
      metricValue(metrics, 'sandpit_operator_reconciles_total', { result });
    const passes = ['success', 'requeue', 'conflict', 'error'].reduce((n, r) => n + reconciles(r), 0);
    const seconds = (ms: number): number => ms / 1000;
    const sorted = (xs: number[]): number[] => xs.sort((a, b) => a - b);
    const startTimes = sorted(
      runs.map((r) =>
        seconds(Date.parse(r.status!.startTime!) - Date.parse(String(r.metadata?.creationTimestamp))),
      ),
    );
    const lastExit =
      Math.max(...runs.map((r) => Date.parse(r.status!.completionTime!))) -
      Date.parse(String(runs[0]!.metadata?.creationTimestamp));
    const lastPodFinished = seconds(Math.max(...pods.finishedAt.values()) - started);
    const lags = sorted(
      runs.map((r) =>
        seconds(
          seenFinished.get(r.metadata?.uid ?? '')! - (pods.finishedAt.get(r.metadata?.uid ?? '') ?? NaN),
        ),
      ),
    );
    const mid = Math.floor(count / 2);
    const allFinishedSeconds = seconds(finished - started);
    const summary =
      `${count} runs: created in ${seconds(created - started).toFixed(1)} s, all finished ${allFinishedSeconds.toFixed(1)} s after the first create; ` +
      `creation→running p50 ${startTimes[mid]} s, max ${startTimes[count - 1]} s; ` +
      `last program exit ${seconds(lastExit).toFixed(0)} s after the first creation (container times have 1 s resolution), ` +
      `last pod seen finished by the apiserver at ${lastPodFinished.toFixed(1)} s; ` +
      `pod finished → run status finished p50 ${lags[mid]!.toFixed(2)} s, max ${lags[count - 1]!.toFixed(2)} s; ` +
      `${passes} reconcile passes (${reconciles('conflict')} conflicts, ${reconciles('error')} errors)`;
    return { runs, allFinishedSeconds, summary, stop };
  } catch (e) {
    await stop(true);
    throw e;
  }
}
