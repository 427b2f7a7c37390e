// The operator killed with SIGKILL (by its PID) while runs made through the gateway are half way,
// and another started: mid-reconcile (SandboxRuns being turned into pods) and mid-claim (warm pool
// pods being claimed). The restarted operator finishes the job: every run ends with its own
// output, no run has two pods running its program, no pool pod serves two runs, and nothing is
// left after the runs' TTL. Restarts only the test's own operator: the cluster is not disturbed.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { RunRequestSchema } from '../../src/api/run.js';
import { evaluate } from '../../src/policy/evaluate.js';
import { contractPolicy } from '../contract/target.js';
import { failureMarkingTest } from '../integration/kubernetes/operator-harness.js';
import {
  createPool,
  isIdlePoolPod,
  poolSpecFor,
  waitPods,
  waitPoolReady,
} from '../integration/kubernetes/pool-harness.js';
import { startKubeFaults, type GatewayRun, type KubeFaults } from './kube-harness.js';

const POOL = 'warm';
const POOL_SIZE = 3;

/** Resolves once `ok()` holds (checked every 10 ms); fails after `timeoutMs`. */
async function until(ok: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('faults: the operator killed with SIGKILL (Kubernetes)', { timeout: 600_000 }, () => {
  let f: KubeFaults;
  let failed = false;
  const it = failureMarkingTest(180_000, () => (failed = true));

  before(async () => {
    f = await startKubeFaults('faults-operator');
    // A pool of the shape the gateway gives a python run, so that python runs are served warm.
    const request = RunRequestSchema.parse({ template: 'python', code: 'pass' });
    const e = evaluate(request, contractPolicy([]));
    assert.ok(e.ok);
    await createPool(f.cluster, f.ns, POOL, poolSpecFor(e.spec, { replicas: POOL_SIZE }));
    await waitPoolReady(f.cluster, f.ns, POOL, POOL_SIZE, 120_000);
  });
  after(async () => {
    await f?.stop(failed);
  });

  it('mid-reconcile: a restarted operator gives each SandboxRun its one pod; every run finishes with its output; nothing left after the TTL', async (t) => {
    // bash runs: not the pool's shape, so each is turned into a pod of its own.
    const runs: GatewayRun[] = [];
    for (let i = 0; i < 6; i++) runs.push(await f.run({ template: 'bash', code: `echo cold ${i}` }));
    const ids = runs.map((r) => r.runId);
    await until(
      () => ids.some((id) => f.pods.byRunName.has(id)),
      60_000,
      'the operator to make the first pod',
    );
    const before = f.operator;
    await f.restartOperator();
    const atKill = ids.filter((id) => f.pods.byRunName.has(id)).length;
    t.diagnostic(`operator ${before.identity} killed with ${atKill} of ${ids.length} pods made`);
    assert.ok(atKill < ids.length, 'the kill came before the operator had made every pod');

    const results = await f.results(runs);
    for (const [i, r] of results.entries()) {
      assert.equal(r.phase, 'Succeeded', `${r.runId}: ${JSON.stringify(r)}`);
      assert.equal(r.stdout, `cold ${i}\n`, r.runId);
      assert.equal(r.exitCode, 0);
      assert.deepEqual(
        [...(f.pods.byRunName.get(r.runId) ?? [])],
        [f.lastSeen.get(r.runId)?.status?.podName],
        `${r.runId}: exactly one pod ever, the one its status names`,
      );
    }
    const cleaned = await f.expectNothingLeft(runs);
    t.diagnostic(`nothing left ${Math.round(cleaned)} ms after the results (TTL ${f.ttlSeconds} s)`);
  });

  it('mid-claim: a restarted operator serves every warm run once; no pool pod serves two runs; the pool is whole again; nothing left after the TTL', async (t) => {
    const runs: GatewayRun[] = [];
    for (let i = 0; i < POOL_SIZE; i++)
      runs.push(
        await f.run({
          template: 'python',
          code: `import time\ntime.sleep(1)\nprint("warm ${i}")`,
        }),
      );
    const ids = runs.map((r) => r.runId);
    // Killed as soon as one pool pod carries a run's labels: the claim's PUT is done, and the job,
    // the start's status and the other runs' claims are on their way.
    await until(() => ids.some((id) => f.pods.byRunName.has(id)), 60_000, 'the first claim');
    const killed = f.operator;
    const next = await f.restartOperator();
    const claimedAtKill = ids.filter((id) => f.pods.byRunName.has(id)).length;
    t.diagnostic(
      `operator ${killed.identity} killed with ${claimedAtKill} of ${ids.length} runs holding a pod`,
    );

    const results = await f.results(runs);
    const served = { warm: 0, cold: 0 };
    for (const [i, r] of results.entries()) {
      assert.equal(r.phase, 'Succeeded', `${r.runId}: ${JSON.stringify(r)}`);
      assert.equal(r.stdout, `warm ${i}\n`, `${r.runId}: its own output, once`);
      served[r.served ?? 'cold']++;
    }
    t.diagnostic(`served: ${served.warm} warm, ${served.cold} cold`);

    // No pod ever carried two runs' labels.
    const runsOfPod = new Map<string, string[]>();
    for (const [run, pods] of f.pods.byRunName)
      for (const pod of pods) runsOfPod.set(pod, [...(runsOfPod.get(pod) ?? []), run]);
    for (const [pod, of] of runsOfPod) assert.equal(of.length, 1, `pod ${pod} carried runs ${of.join(', ')}`);
    // A run's program ran in one pod: the one its status names. Any other pod claimed for it was
    // one whose runner said that no job arrived (the pod's own report), and was let go for it.
    const neverGotJob = new Set(
      next.lines
        .filter((l) => l.msg === 'The job never reached the pool pod; serving the run again')
        .map((l) => String(l.pod)),
    );
    for (const r of results) {
      const final = f.lastSeen.get(r.runId)?.status?.podName;
      const pods = [...(f.pods.byRunName.get(r.runId) ?? [])];
      assert.ok(
        final && pods.includes(final),
        `${r.runId} ran in ${final}, one of its pods ${pods.join(', ')}`,
      );
      for (const other of pods.filter((p) => p !== final))
        assert.ok(
          neverGotJob.has(other),
          `${r.runId} also had pod ${other}, which its runner did not report jobless`,
        );
    }
    // The pods the killed operator held attached ended with it; the new one keeps the pool whole.
    await waitPods(
      f.cluster,
      f.ns,
      (pods) => pods.filter(isIdlePoolPod(POOL)).length === POOL_SIZE,
      120_000,
      `${POOL_SIZE} idle pods in pool ${POOL} again`,
    );
    const cleaned = await f.expectNothingLeft(runs);
    t.diagnostic(`nothing left ${Math.round(cleaned)} ms after the results (TTL ${f.ttlSeconds} s)`);
  });
});
