/**
 * Load (issue 21) on Kubernetes: 100 SandboxRuns made at once, reconciled by one operator on the
 * test cluster's 2-CPU node. All finish with their own status and output, one pod each, none lost
 * or duplicated, one audit record each; then their TTL removes every run and pod.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { recordFigure } from '../support/figures.js';
import { kubeTest } from '../support/kube/index.js';
import { runsAtOnce } from '../integration/kubernetes/runs-at-once.js';
import { waitFor } from '../e2e/helpers.js';

const RUNS = 100;
const TTL_SECONDS = 30;

describe('load: 100 SandboxRuns at once (kubernetes)', { timeout: 40 * 60_000 }, () => {
  test(
    `${RUNS} SandboxRuns at once: all finish, one pod each, none lost or duplicated, nothing left after TTL`,
    { timeout: 35 * 60_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      const batch = await runsAtOnce({ cluster, ns }, RUNS, { ttlSecondsAfterFinished: TTL_SECONDS });
      let failed = true;
      try {
        t.diagnostic(batch.summary);
        const t0 = performance.now();
        const left = async (): Promise<number> => {
          const runs = (await cluster.kubectl(['get', 'sandboxruns', '-n', ns, '-o', 'name'])).stdout;
          const pods = await cluster.core.listNamespacedPod({ namespace: ns });
          return runs.split('\n').filter(Boolean).length + pods.items.length;
        };
        // The last run finished just now: its TTL, and the operator's and garbage collector's passes.
        await waitFor(
          'every SandboxRun and pod to be removed after its TTL',
          async () => ((await left()) === 0 ? true : undefined),
          (TTL_SECONDS + 300) * 1000,
        );
        recordFigure(t, { name: 'all finished', value: Math.round(batch.allFinishedSeconds), unit: 's' });
        recordFigure(t, {
          name: 'all removed after the last finished',
          value: Math.round((performance.now() - t0) / 1000),
          unit: 's',
          bound: `TTL ${TTL_SECONDS} s + 300 s`,
        });
        failed = false;
      } finally {
        await batch.stop(failed);
      }
      assert.equal(batch.runs.length, RUNS);
    }),
  );
});
