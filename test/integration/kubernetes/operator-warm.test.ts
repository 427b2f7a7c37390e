// Warm runs on the real cluster (issue 16): a SandboxRun of a pool's shape is served by an idle
// pool pod (the attach held ahead, claim, job, result from the exit trailer), its status, Events and
// output as a cold run's, the pod deleted after; another shape, or an empty pool, goes cold at
// once; the deadline counts from the claim; cancel; two operators and a SIGKILL of the leader
// during a burst of claims (the pods it held attached end with it, and are replaced); a claimed
// pod whose run records no job start. The pool pods are made
// by the test (test/integration/kubernetes/pool-pods.ts), as the pool controller makes them.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { childName } from '../../../src/api/v1alpha1/labels.js';
import { CLAIM_GRACE_SECONDS } from '../../../src/controller/pod/claim-pool-pod.js';
import { kubeTest, type KubeCluster } from '../../support/kube/index.js';
import {
  cancelRun,
  createRun,
  getRun,
  metricValue,
  OperatorProcess,
  operatorSuite,
  prepareNamespace,
  sandboxRun,
  waitForFinished,
  waitForPhase,
  leaderOf,
} from './operator-harness.js';
import { createPool, createPoolPods, scalePool, type TestPool } from './pool-pods.js';
import { waitPoolReady } from './pool-harness.js';

const POOL_REQUEST = { template: 'python', code: 'pass' } as const;
// eslint-disable-next-line no-control-regex -- RS starts the trailer line
const TRAILER_LINE = /^warm hello\n\n\x1esandpit-exit [0-9a-f]{32} \{"exitCode":0,[^\n]*\}\n/;

async function podGone(cluster: KubeCluster, ns: string, name: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pods = await cluster.core.listNamespacedPod({
      namespace: ns,
      fieldSelector: `metadata.name=${name}`,
    });
    if (pods.items.length === 0) return;
    assert.ok(Date.now() < deadline, `pod ${ns}/${name} is still there`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Every pod's run-uid labels over time, and the pods that carried the claimed label (by watch). */
function recordClaims(cluster: KubeCluster, ns: string) {
  const runsOfPod = new Map<string, Set<string>>();
  const stopper = new AbortController();
  cluster
    .waitFor<V1Pod>(
      { path: `/api/v1/namespaces/${ns}/pods`, labelSelector: 'sandpit.dev/pool-pod=claimed' },
      (pod) => {
        const name = pod.metadata?.name ?? '';
        const uid = pod.metadata?.labels?.['sandpit.dev/run-uid'];
        const set = runsOfPod.get(name) ?? new Set<string>();
        if (uid) set.add(uid);
        runsOfPod.set(name, set);
        return false;
      },
      { timeoutMs: 3_600_000, signal: stopper.signal },
    )
    .catch(() => undefined);
  return { runsOfPod, stop: () => stopper.abort() };
}

const sleepy = (seconds: number, line: string): string =>
  `import time\ntime.sleep(${seconds})\nprint(${JSON.stringify(line)})`;

describe('warm runs from pool pods', { timeout: 900_000 }, () => {
  const s = operatorSuite('warm');
  let pool: TestPool;

  test('set-up: a SandboxPool owner', async () => {
    pool = await createPool(s.suite.cluster, s.suite.ns, 'py');
  });

  s.it('a run applied with kubectl of the pool’s shape is served warm by the pool pod', async () => {
    const { cluster, ns, operator } = s.suite;
    const [podName] = await scalePool(cluster, ns, pool, 1);
    const manifest = sandboxRun('warm-kubectl', {
      template: 'python',
      // Long enough for `kubectl logs -f` to start before the pod ends (the job starts with the claim).
      code: 'import sys, time\ntime.sleep(3)\nprint("warm hello", flush=True)\ntime.sleep(0.3)\nprint("warm err", file=sys.stderr)',
    });
    const applied = await cluster.kubectl(['apply', '-n', ns, '-f', '-'], { input: stringify(manifest) });
    assert.equal(applied.code, 0, applied.stderr);
    const running = await waitForPhase(cluster, ns, 'warm-kubectl', 'Running', 30_000);
    assert.equal(running.status?.podName, podName);
    // The pod log while the program runs: the output, then the trailer line.
    const logs = cluster.kubectl(['logs', '-f', '-n', ns, podName!, '-c', 'sandbox']);
    const run = await waitForFinished(cluster, ns, 'warm-kubectl', 60_000);
    const st = run.status!;
    assert.equal(st.phase, 'Succeeded', JSON.stringify(st));
    assert.equal(st.served, 'warm');
    assert.equal(st.pool, 'py');
    assert.equal(st.exitCode, 0);
    assert.equal(st.podName, podName);
    // Both streams, in the order they came (the pod's two streams reach the attach on their own:
    // the program spaces them out).
    assert.equal(st.output?.tail, 'warm hello\nwarm err\n');
    assert.equal(st.output?.bytes, 'warm hello\nwarm err\n'.length);
    assert.ok(st.startTime && st.completionTime);
    const log = await logs;
    // The output, then the trailer line (kubectl may add its own line once the pod is deleted). The
    // kubelet reads stdout and stderr on their own: stderr's last line may land before or after the
    // trailer, which follows stdout's output.
    assert.ok(log.stdout.includes('warm err\n'), log.stdout);
    assert.match(log.stdout.replace('warm err\n', ''), TRAILER_LINE);
    // Events are written a moment after they are recorded (controller/events.ts): the last one first.
    await cluster.waitFor<CoreV1Event>(
      { path: `/api/v1/namespaces/${ns}/events`, fieldSelector: 'involvedObject.name=warm-kubectl' },
      (e) => e.reason === 'Succeeded',
      { timeoutMs: 15_000, description: 'the Succeeded Event' },
    );
    const events = await cluster.core.listNamespacedEvent({
      namespace: ns,
      fieldSelector: `involvedObject.name=warm-kubectl`,
    });
    const reasons = events.items.map((e) => e.reason).sort();
    assert.deepEqual(reasons, ['ClaimedPod', 'Started', 'Succeeded'], JSON.stringify(reasons));
    await podGone(cluster, ns, podName!);
    // No pod of its own was ever made.
    assert.equal(
      (
        await cluster.core.listNamespacedPod({
          namespace: ns,
          fieldSelector: `metadata.name=${childName('warm-kubectl', run.metadata.uid ?? '')}`,
        })
      ).items.length,
      0,
    );
    const metrics = await operator.metrics();
    assert.ok(metricValue(metrics, 'sandpit_pool_claims_total', { result: 'warm' }) >= 1);
    const served = operator.find((l) => l.msg === 'Served SandboxRun warm' && l.run === `${ns}/warm-kubectl`);
    assert.ok(served, 'the operator logged the warm serve');
    // The leader attached to the ready pool pod ahead of the claim: no attach on the run's path.
    assert.equal(served.attachedAhead, true);
    assert.equal(typeof served.jobToResultMs, 'number');
  });

  s.it('another shape, or an empty pool, is served cold at once', async () => {
    const { cluster, ns, operator } = s.suite;
    await scalePool(cluster, ns, pool, 1);
    const emptyBefore = metricValue(await operator.metrics(), 'sandpit_pool_claims_total', {
      result: 'empty',
    });
    await createRun(
      cluster,
      ns,
      sandboxRun('other-shape', {
        template: 'python',
        code: 'print("cold one")',
        resources: { memory: '96Mi' },
      }),
    );
    const other = await waitForFinished(cluster, ns, 'other-shape', 60_000);
    assert.equal(other.status?.phase, 'Succeeded', JSON.stringify(other.status));
    assert.equal(other.status?.served, 'cold');
    assert.equal(other.status?.pool, undefined);
    assert.equal(other.status?.podName, childName('other-shape', other.metadata.uid ?? ''));
    assert.equal(other.status?.output?.tail, 'cold one\n');
    // The one idle pod serves the next run; the one after finds the pool empty.
    await createRun(
      cluster,
      ns,
      sandboxRun('takes-last', { template: 'python', code: sleepy(2, 'took the last') }),
    );
    await waitForPhase(cluster, ns, 'takes-last', 'Running', 30_000);
    await createRun(
      cluster,
      ns,
      sandboxRun('pool-empty', { template: 'python', code: 'print("pool was empty")' }),
    );
    const [last, empty] = await Promise.all([
      waitForFinished(cluster, ns, 'takes-last', 60_000),
      waitForFinished(cluster, ns, 'pool-empty', 60_000),
    ]);
    assert.equal(last.status?.served, 'warm');
    assert.equal(last.status?.output?.tail, 'took the last\n');
    assert.equal(empty.status?.phase, 'Succeeded');
    assert.equal(empty.status?.served, 'cold');
    assert.equal(empty.status?.output?.tail, 'pool was empty\n');
    const emptyAfter = metricValue(await operator.metrics(), 'sandpit_pool_claims_total', {
      result: 'empty',
    });
    assert.ok(emptyAfter >= emptyBefore + 1, `empty claims ${emptyBefore} → ${emptyAfter}`);
  });

  s.it('the deadline counts from the claim: a program longer than its timeout ends TimedOut', async () => {
    const { cluster, ns } = s.suite;
    const [podName] = await scalePool(cluster, ns, pool, 1);
    await new Promise((r) => setTimeout(r, 3000)); // the pod has aged before the claim
    await createRun(
      cluster,
      ns,
      sandboxRun('warm-timeout', { template: 'python', code: sleepy(60, 'never'), timeoutSeconds: 2 }),
    );
    await waitForPhase(cluster, ns, 'warm-timeout', 'Running', 30_000);
    const claimed = await cluster.core.readNamespacedPod({ namespace: ns, name: podName! });
    const age = (Date.now() - Date.parse(String(claimed.status?.startTime))) / 1000;
    const deadline = claimed.spec?.activeDeadlineSeconds ?? Infinity;
    assert.ok(
      deadline <= Math.ceil(age) + 2 + CLAIM_GRACE_SECONDS + 1,
      `activeDeadlineSeconds ${deadline}, age ${age.toFixed(1)} s`,
    );
    assert.ok(deadline < 900, 'lowered from the pool pod’s own');
    const run = await waitForFinished(cluster, ns, 'warm-timeout', 60_000);
    assert.equal(run.status?.phase, 'TimedOut', JSON.stringify(run.status));
    assert.equal(run.status?.served, 'warm');
    const took =
      (Date.parse(run.status?.completionTime ?? '') - Date.parse(run.status?.startTime ?? '')) / 1000;
    assert.ok(took < 10, `ended ${took} s after the claim`);
    await podGone(cluster, ns, podName!);
  });

  s.it('a cancelled warm run ends Cancelled and its pod goes', async () => {
    const { cluster, ns } = s.suite;
    const [podName] = await scalePool(cluster, ns, pool, 1);
    await createRun(
      cluster,
      ns,
      sandboxRun('warm-cancel', { template: 'python', code: sleepy(60, 'never') }),
    );
    const running = await waitForPhase(cluster, ns, 'warm-cancel', 'Running', 30_000);
    assert.equal(running.status?.served, 'warm');
    await cancelRun(cluster, ns, 'warm-cancel');
    const run = await waitForFinished(cluster, ns, 'warm-cancel', 60_000);
    assert.equal(run.status?.phase, 'Cancelled', JSON.stringify(run.status));
    await podGone(cluster, ns, podName!, 30_000);
  });
});

describe('warm runs and failover', { timeout: 900_000 }, () => {
  test(
    'two operators: only the leader claims; a SIGKILL of the leader mid-burst leaves no pod serving two runs and no run lost',
    { timeout: 400_000 },
    kubeTest(async ({ cluster, ns, t }) => {
      await prepareNamespace(cluster, ns);
      // No operator runs yet: the test makes the pool's pods, as many as its replicas.
      const pool = await createPool(cluster, ns, 'burst', 6);
      await createPoolPods(cluster, ns, pool, POOL_REQUEST, 6);
      const claims = recordClaims(cluster, ns);
      const ops = [
        OperatorProcess.start(cluster, { namespace: ns, identity: 'warm-a' }),
        OperatorProcess.start(cluster, { namespace: ns, identity: 'warm-b' }),
      ];
      let ok = false;
      try {
        const { leader, standby } = await leaderOf(ops);
        const names = Array.from({ length: 10 }, (_, i) => `burst-${i}`);
        await Promise.all(
          names.map((n, i) =>
            createRun(cluster, ns, sandboxRun(n, { template: 'python', code: sleepy(1, `burst ${i}`) })),
          ),
        );
        // Kill the leader once it has claimed a pod: the others are mid-way.
        const until = Date.now() + 60_000;
        while (claims.runsOfPod.size === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
        assert.ok(claims.runsOfPod.size > 0, 'the leader claimed a pod');
        assert.equal(
          standby.find((l) => l.msg === 'Synced caches'),
          undefined,
          'only the leader works',
        );
        await leader.kill('SIGKILL');
        t.diagnostic(`at the kill: ${claims.runsOfPod.size} pods claimed`);
        const runs = await Promise.all(names.map((n) => waitForFinished(cluster, ns, n, 180_000)));
        const split = { warm: 0, cold: 0 };
        for (const [i, run] of runs.entries()) {
          assert.equal(run.status?.phase, 'Succeeded', `${run.metadata.name}: ${JSON.stringify(run.status)}`);
          assert.equal(run.status?.output?.tail, `burst ${i}\n`, run.metadata.name);
          split[run.status?.served === 'warm' ? 'warm' : 'cold']++;
        }
        t.diagnostic(`served: ${split.warm} warm, ${split.cold} cold`);
        for (const [pod, uids] of claims.runsOfPod)
          assert.ok(uids.size <= 1, `pod ${pod} carried the run-uids of ${uids.size} runs`);
        const podOf = runs.filter((r) => r.status?.served === 'warm').map((r) => r.status?.podName);
        assert.equal(new Set(podOf).size, podOf.length, 'no pool pod served two runs');
        // The idle pods the killed leader held attached ended with it (their stdinOnce stdin
        // closed: no job arrived), so none waits for a job no one will write; the new leader's
        // pool controller replaced them, and serves the next runs warm from its own.
        await waitPoolReady(cluster, ns, 'burst', 6, 120_000);
        const after = ['after-0', 'after-1'];
        await Promise.all(
          after.map((n) =>
            createRun(cluster, ns, sandboxRun(n, { template: 'python', code: `print("${n}")` })),
          ),
        );
        for (const n of after) {
          const run = await waitForFinished(cluster, ns, n, 60_000);
          assert.equal(run.status?.phase, 'Succeeded', JSON.stringify(run.status));
          assert.equal(run.status?.served, 'warm', `${n} is served warm by the new leader`);
          assert.equal(run.status?.output?.tail, `${n}\n`);
        }
        ok = true;
      } finally {
        claims.stop();
        for (const op of ops) {
          if (!ok) process.stderr.write(`# operator ${op.identity} log: ${op.logFile}\n`);
          await op.stop(!ok);
        }
      }
    }),
  );

  test(
    'a claimed pod whose run records no job start is adopted by the next operator; its runner got no job, so the run is served again and finishes',
    { timeout: 240_000 },
    kubeTest(async ({ cluster, ns }) => {
      await prepareNamespace(cluster, ns);
      const pool = await createPool(cluster, ns, 'stale', 1);
      const [podName] = await createPoolPods(cluster, ns, pool, POOL_REQUEST, 1);
      const created = await createRun(
        cluster,
        ns,
        sandboxRun('stale-claim', { template: 'python', code: 'print("served after all")' }),
      );
      // What an operator that died right after its claim leaves: the pod claimed, the run untouched.
      const pod = await cluster.core.readNamespacedPod({ namespace: ns, name: podName! });
      const claim = {
        ...pod,
        metadata: {
          ...pod.metadata,
          labels: {
            ...pod.metadata?.labels,
            'sandpit.dev/pool-pod': 'claimed',
            'sandpit.dev/run': 'stale-claim',
            'sandpit.dev/run-uid': created.metadata.uid ?? '',
          },
          ownerReferences: [
            {
              apiVersion: 'sandpit.dev/v1alpha1',
              kind: 'SandboxRun',
              name: 'stale-claim',
              uid: created.metadata.uid ?? '',
              controller: true,
            },
          ],
        },
      };
      await cluster.core.replaceNamespacedPod({ namespace: ns, name: podName!, body: claim });
      assert.equal((await getRun(cluster, ns, 'stale-claim'))?.status, undefined);
      const op = OperatorProcess.start(cluster, { namespace: ns, identity: 'warm-next' });
      let ok = false;
      try {
        const run = await waitForFinished(cluster, ns, 'stale-claim', 90_000);
        assert.equal(run.status?.phase, 'Succeeded', JSON.stringify(run.status));
        assert.equal(run.status?.output?.tail, 'served after all\n');
        assert.notEqual(run.status?.podName, podName);
        await podGone(cluster, ns, podName!, 30_000);
        assert.ok(
          op.find((l) => l.msg === 'Adopted a pool pod claimed for the run before its start was recorded'),
        );
        // Its runner was told at once that no job would come (an attach closed), not at its deadline.
        const again = op.find((l) => l.msg === 'The job never reached the pool pod; serving the run again');
        assert.match(String(again?.why), /^no job arrived: stdin ended first/);
        ok = true;
      } finally {
        if (!ok) process.stderr.write(`# operator log: ${op.logFile}\n`);
        await op.stop(!ok);
      }
    }),
  );
});
