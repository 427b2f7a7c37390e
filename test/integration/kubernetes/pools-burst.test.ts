// A burst of 100 runs on a SandboxPool of 10 (issue 16's acceptance), on the real cluster: the
// runs go through the gateway's Kubernetes backend (the static gateway identity, as the contract
// tier makes it) to a real `sandpit operator` process. Every run finishes with its own output (each
// prints something unique), none is lost or duplicated, at least the pool's 10 are served warm,
// the pool has 10 ready pods again within 30 s of the burst's end, and afterwards no pod of the
// burst is left: only the pool's 10 idle ones.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { RunRequestSchema, type RunResult } from '../../../src/api/run.js';
import { LABEL_RUN_UID } from '../../../src/api/v1alpha1/labels.js';
import type { SandboxRun, SandboxRunStatus } from '../../../src/api/v1alpha1/sandboxrun.js';
import type { KubernetesBackend } from '../../../src/backends/kubernetes/kubernetes-backend.js';
import { newRunId } from '../../../src/gateway/runs.js';
import { evaluate, type EffectiveSpec } from '../../../src/policy/evaluate.js';
import { withCluster } from '../../support/kube/index.js';
import { bindGatewayRbac, gatewayBackend } from '../../contract/kube-gateway.js';
import { CONTRACT_SANDBOX_CONFIG, contractPolicy } from '../../contract/target.js';
import { isFinished, runsPath, startSuite, stopSuite, type Suite } from './operator-harness.js';
import { createPool, isIdlePoolPod, poolSpecFor, waitPods, waitPoolReady } from './pool-harness.js';

const POOL = 'burst';
const POOL_SIZE = 10;
const RUNS = 100;
const REFILL_MS = 30_000;

interface Settled {
  runId: string;
  result?: RunResult;
  error?: unknown;
}

let suite: Suite;
let backend: KubernetesBackend;
let failed = false;

function spec(code: string): EffectiveSpec {
  const e = evaluate(RunRequestSchema.parse({ template: 'python', code }), contractPolicy([]));
  assert.ok(e.ok, JSON.stringify(e));
  return e.spec;
}

describe('a burst of 100 runs on a SandboxPool of 10', { timeout: 30 * 60_000 }, () => {
  before(async () => {
    suite = await startSuite(await withCluster(), 'pools-burst', { sandbox: CONTRACT_SANDBOX_CONFIG });
    await bindGatewayRbac(suite.cluster, suite.ns);
    backend = gatewayBackend(suite.cluster, suite.ns, {
      // 100 runs at once on 2 cores: the operator's 4 workers take minutes to give each a status
      // and 90 cold pods as long to start. These bounds are the machine's, not the feature's.
      pickupTimeoutSeconds: 600,
      pendingTimeoutSeconds: 600,
      // Finished runs (and a cold run's pod with them) go soon: the test waits for that.
      ttlSecondsAfterFinished: 5,
    });
  });
  after(async () => {
    await backend?.close();
    await stopSuite(suite, failed, (l) => process.stderr.write(`# ${l}\n`));
  });

  test('every run finishes with its own output, at least 10 warm, the pool refills in 30 s, no pod left', async (t) => {
    try {
      const { cluster, ns } = suite;
      await createPool(cluster, ns, POOL, poolSpecFor(spec('pass'), { replicas: POOL_SIZE }));
      await waitPoolReady(cluster, ns, POOL, POOL_SIZE, 180_000);

      // Every run's terminal status as the operator wrote it, by watch (a run goes 5 s after it ends).
      const statuses = new Map<string, SandboxRunStatus>();
      // How long each run waited for the operator's first word (its Admitted condition).
      const pickup = new Map<string, number>();
      const recorded = cluster.waitFor<SandboxRun>(
        { path: runsPath(ns) },
        (r) => {
          const admitted = r.status?.conditions?.find((c) => c.type === 'Admitted')?.lastTransitionTime;
          if (admitted && !pickup.has(r.metadata.name))
            pickup.set(
              r.metadata.name,
              Date.parse(admitted) - Date.parse(r.metadata.creationTimestamp ?? ''),
            );
          if (r.status && isFinished(r)) statuses.set(r.metadata.name, r.status);
          return statuses.size === RUNS;
        },
        { timeoutMs: 25 * 60_000, description: `the ${RUNS} SandboxRuns to finish` },
      );
      const token = randomBytes(4).toString('hex');
      const expected = new Map<string, string>();
      const started = performance.now();
      const runs = Array.from({ length: RUNS }, (_, i) => {
        const runId = newRunId();
        const line = `burst ${i} ${token} ${runId}`;
        expected.set(runId, `${line}\n`);
        const execution = backend.start(spec(`print(${JSON.stringify(line)})`), {
          runId,
          principal: 'burst',
          owner: 'burst-test',
        });
        return execution.result.then(
          (result): Settled => ({ runId, result }),
          (error: unknown): Settled => ({ runId, error }),
        );
      });
      const settled = await Promise.all(runs);
      const burstEnd = performance.now();
      t.diagnostic(`burst of ${RUNS}: ${((burstEnd - started) / 1000).toFixed(1)} s until the last result`);

      // None lost, none duplicated: 100 distinct run ids, each with its own output.
      assert.equal(new Set(settled.map((s) => s.runId)).size, RUNS);
      const errors = settled.filter((s) => s.error !== undefined);
      assert.deepEqual(
        errors.map((s) => `${s.runId}: ${String(s.error)}`),
        [],
        'every run gave a result',
      );
      for (const { runId, result } of settled) {
        assert.ok(result);
        assert.equal(result.runId, runId);
        assert.equal(
          result.phase,
          'Succeeded',
          `${runId}: ${result.phase} ${result.reason} ${result.message}`,
        );
        assert.equal(result.exitCode, 0);
        assert.equal(result.stdout, expected.get(runId), `${runId}'s own output`);
      }
      const warm = settled.filter((s) => s.result?.served === 'warm').map((s) => s.runId);
      const cold = settled.filter((s) => s.result?.served === 'cold').length;
      t.diagnostic(`served: ${warm.length} warm, ${cold} cold (pool of ${POOL_SIZE})`);
      assert.equal(warm.length + cold, RUNS);
      assert.ok(warm.length >= POOL_SIZE, `at least ${POOL_SIZE} served warm, got ${warm.length}`);
      // The gateway's word is the operator's: each SandboxRun says how it was served, a warm one names the pool.
      await recorded;
      const waits = [...pickup.values()].sort((a, b) => a - b);
      t.diagnostic(
        `picked up (first status) within ${(waits[Math.floor(waits.length / 2)]! / 1000).toFixed(1)} s at p50, ${(waits.at(-1)! / 1000).toFixed(1)} s at most`,
      );
      for (const { runId, result } of settled) {
        const status = statuses.get(runId);
        assert.equal(status?.served ?? 'cold', result?.served, `${runId}: served`);
        if (status?.served === 'warm') assert.equal(status.pool, POOL);
      }

      // The pool has its 10 ready pods again within 30 s of the burst's end (its status, by watch).
      const refilled = await waitPoolReady(cluster, ns, POOL, POOL_SIZE, REFILL_MS);
      t.diagnostic(
        `pool ready again ${((performance.now() - burstEnd) / 1000).toFixed(1)} s after the burst's end (ready ${refilled.status?.readyReplicas})`,
      );

      // Afterwards: no pod of the burst's runs is left, only the pool's 10 idle ones.
      const left = await waitPods(
        cluster,
        ns,
        (pods) =>
          pods.length === POOL_SIZE &&
          pods.every((p) => isIdlePoolPod(POOL)(p) && !p.metadata?.labels?.[LABEL_RUN_UID]),
        180_000,
        `only the pool's ${POOL_SIZE} idle pods in ${ns}`,
      );
      t.diagnostic(`left afterwards: ${left.length} idle pool pods, no run's pod`);
    } catch (e) {
      failed = true;
      throw e;
    }
  });
});
