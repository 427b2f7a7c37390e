// 50 SandboxRuns applied at once on a 2-CPU node: all finish with the right status, none lost,
// none duplicated (one pod each, ever). Prints the time to finish all 50.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { kubeTest } from '../../support/kube/index.js';
import { runsAtOnce } from './runs-at-once.js';

const RUNS = 50;

describe('operator at scale', { timeout: 900_000 }, () => {
  test(
    `${RUNS} SandboxRuns at once: all finish with correct status, none lost, none duplicated`,
    { timeout: 600_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      const batch = await runsAtOnce({ cluster, ns }, RUNS);
      await batch.stop(false);
      const live = await cluster.core.listNamespacedPod({
        namespace: ns,
        labelSelector: 'sandpit.dev/managed-by=sandpit-operator',
      });
      assert.equal(live.items.length, RUNS);
      t.diagnostic(batch.summary);
      process.stderr.write(`# ${batch.summary}\n`);
    }),
  );
});
