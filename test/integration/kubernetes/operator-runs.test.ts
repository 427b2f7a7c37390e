// SandboxRuns on the real cluster, reconciled by the real operator (the static operator identity,
// bound to deploy/rbac.yaml's roles): every outcome the shared run model names.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { NodeV1Api, type CoreV1Event, type V1NetworkPolicy, type V1Pod } from '@kubernetes/client-node';
import { isNotFound, withCluster } from '../../support/kube/index.js';
import { auditOf } from '../../support/audit.js';
import {
  applyHelloSample,
  cancelRun,
  createRun,
  createTimed,
  getRun,
  lateBy,
  sandboxRun,
  secondsToComplete,
  operatorSuite,
  podsOf,
  waitForFinished,
  waitForPhase,
} from './operator-harness.js';

const MISSING_RUNTIME_CLASS = 'sandpit-test-absent';
/** A RuntimeClass that exists, whose handler the node's containerd does not have. */
const NO_HANDLER_CLASS = 'sandpit-test-no-handler';
const ABSENT_HANDLER = 'sandpit-absent';

describe('SandboxRun outcomes on the real cluster', { concurrency: true, timeout: 300_000 }, () => {
  const ops = operatorSuite('operator-runs', {
    kubernetes: { allowedRuntimeClasses: [MISSING_RUNTIME_CLASS, NO_HANDLER_CLASS] },
  });
  const { it } = ops;
  const node = async (): Promise<NodeV1Api> => (await withCluster()).kc.makeApiClient(NodeV1Api);
  before(async () => {
    const api = await node();
    await api.deleteRuntimeClass({ name: NO_HANDLER_CLASS }).catch((e: unknown) => {
      if (!isNotFound(e)) throw e;
    });
    await api.createRuntimeClass({
      body: { metadata: { name: NO_HANDLER_CLASS }, handler: ABSENT_HANDLER },
    });
  });
  after(async () => {
    await (await node()).deleteRuntimeClass({ name: NO_HANDLER_CLASS });
  });

  it('kubectl apply of deploy/samples/python-hello.yaml succeeds; kubectl get sbr shows the columns', async () => {
    const { cluster, ns } = ops.suite;
    const run = await applyHelloSample(cluster, ns, 60_000);
    assert.equal(run.status?.output?.truncated, false);
    assert.ok(run.status?.startTime && run.status.completionTime && run.status.podName);
    for (const c of run.status?.conditions ?? [])
      assert.equal(c.observedGeneration, run.metadata?.generation);
    assert.equal(run.status?.observedGeneration, run.metadata?.generation);

    const get = await cluster.kubectl(['get', 'sbr', '-n', ns, 'python-hello']);
    assert.equal(get.code, 0, get.stderr);
    const [header, row] = get.stdout.trim().split('\n');
    assert.match(header ?? '', /^NAME\s+PHASE\s+REASON\s+EXIT CODE\s+AGE$/);
    assert.match(row ?? '', /^python-hello\s+Succeeded\s+Completed\s+0\s+\d+s$/);
  });

  it('a failing program: Failed/Error with its exit code and output', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('fails', { template: 'python', code: "import sys\nprint('about to fail')\nsys.exit(3)" }),
    );
    const run = await waitForFinished(cluster, ns, 'fails', 60_000);
    assert.equal(run.status?.phase, 'Failed');
    assert.equal(run.status?.reason, 'Error');
    assert.equal(run.status?.exitCode, 3);
    assert.match(run.status?.output?.tail ?? '', /about to fail/);
  });

  it('a one-second run: the audit durationMs is the runner’s measure, not whole pod seconds', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('one-second', { template: 'python', code: 'import time\ntime.sleep(1)' }),
    );
    const run = await waitForFinished(cluster, ns, 'one-second', 60_000);
    assert.equal(run.status?.phase, 'Succeeded');
    const line = await ops.suite.operator.waitForLog(
      (l) => auditOf(l)?.event === 'run' && auditOf(l)?.runId === `${ns}/one-second`,
      10_000,
      'the audit record of the one-second run',
    );
    const ms = auditOf(line)?.durationMs as number;
    assert.ok(ms >= 1000 && ms < 5000, `durationMs ${ms}`);
  });

  it('an endless loop: TimedOut/DeadlineExceeded at the deadline, reported as promptly as its start', async () => {
    const { cluster, ns } = ops.suite;
    const timeoutSeconds = 5;
    await createRun(
      cluster,
      ns,
      sandboxRun('loops', { template: 'python', code: 'while True:\n    pass', timeoutSeconds }),
    );
    const running = await waitForPhase(cluster, ns, 'loops', 'Running', 60_000);
    // How long the start took from the container to this test (kubelet, operator, status, watch): the
    // end goes the same way, so it may take about as long on this machine as loaded now.
    const startLagMs = Math.max(0, Date.now() - Date.parse(running.status?.startTime ?? ''));
    const run = await waitForFinished(cluster, ns, 'loops', 60_000);
    const endLag = (Date.now() - Date.parse(run.status?.completionTime ?? '')) / 1000;
    assert.equal(run.status?.phase, 'TimedOut', JSON.stringify(run.status));
    assert.equal(run.status?.reason, 'DeadlineExceeded');
    // The runner's deadline, by the container's own times (activeDeadlineSeconds would come later).
    const ran = (Date.parse(run.status.completionTime!) - Date.parse(run.status.startTime!)) / 1000;
    assert.ok(ran >= timeoutSeconds - 1 && ran <= timeoutSeconds + 5, `ran ${ran} s`);
    assert.ok(
      endLag <= lateBy(startLagMs),
      `TimedOut seen ${endLag.toFixed(1)} s after the container ended (its start took ${(startLagMs / 1000).toFixed(1)} s)`,
    );
  });

  it('a memory hog: Failed/OOMKilled', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('hog', {
        template: 'python',
        code: 'blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))',
        resources: { memory: '64Mi' },
      }),
    );
    const run = await waitForFinished(cluster, ns, 'hog', 60_000);
    assert.equal(run.status?.phase, 'Failed', JSON.stringify(run.status));
    assert.equal(run.status?.reason, 'OOMKilled');
    assert.equal(run.status?.exitCode, 137);
  });

  it('an image outside the allowlist: Rejected/PolicyDenied, and no Pod, ConfigMap or NetworkPolicy', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('rejected', { image: 'docker.io/library/alpine:3.19', command: ['true'] }),
    );
    const run = await waitForFinished(cluster, ns, 'rejected', 30_000);
    assert.equal(run.status?.phase, 'Rejected');
    assert.equal(run.status?.reason, 'PolicyDenied');
    assert.match(
      run.status?.message ?? '',
      /image "docker\.io\/library\/alpine:3\.19" is not in the allowlist/,
    );
    assert.equal(run.status?.podName, undefined);
    assert.deepEqual(await podsOf(ops.suite, run), []);
    const selector = `sandpit.dev/run-uid=${run.metadata?.uid}`;
    assert.deepEqual(
      (await cluster.core.listNamespacedConfigMap({ namespace: ns, labelSelector: selector })).items,
      [],
    );
    const admitted = run.status?.conditions?.find((c) => c.type === 'Admitted');
    assert.equal(admitted?.status, 'False');
  });

  it('a missing image: Failed/ImageNotFound by pendingTimeoutSeconds', async () => {
    const { cluster, ns } = ops.suite;
    const pendingTimeoutSeconds = 10;
    const reactionMs = await createTimed(
      cluster,
      ns,
      sandboxRun('no-image', {
        image: 'sandpit/python:0.0-absent',
        command: ['true'],
        pendingTimeoutSeconds,
      }),
    );
    const run = await waitForFinished(cluster, ns, 'no-image', 60_000);
    const took = secondsToComplete(run);
    assert.equal(run.status?.phase, 'Failed', JSON.stringify(run.status));
    assert.equal(run.status?.reason, 'ImageNotFound');
    assert.ok(
      took <= pendingTimeoutSeconds + lateBy(reactionMs),
      `took ${took.toFixed(1)} s (the operator's first reaction: ${reactionMs.toFixed(0)} ms)`,
    );
    // The stuck pod is deleted (the kubelet may take its time to confirm a pod whose image never came).
    await cluster
      .waitFor<V1Pod>(
        { path: `/api/v1/namespaces/${ns}/pods`, name: run.status?.podName },
        (p, type) => type === 'DELETED' || p.metadata?.deletionTimestamp !== undefined,
        { timeoutMs: 15_000, description: 'the stuck pod to be deleted' },
      )
      .catch(async (e: unknown) => {
        if ((await podsOf(ops.suite, run)).length > 0) throw e; // already gone is fine too
      });
  });

  it('an unknown RuntimeClass: Failed/RuntimeClassNotFound at pendingTimeoutSeconds, no pod', async () => {
    const { cluster, ns } = ops.suite;
    const pendingTimeoutSeconds = 8;
    const reactionMs = await createTimed(
      cluster,
      ns,
      sandboxRun('no-runtime-class', {
        template: 'python',
        code: 'print(1)',
        runtimeClassName: MISSING_RUNTIME_CLASS,
        pendingTimeoutSeconds,
      }),
    );
    const pending = await waitForPhase(cluster, ns, 'no-runtime-class', 'Pending', 30_000);
    const started = pending.status?.conditions?.find((c) => c.type === 'Started');
    assert.equal(started?.reason, 'RuntimeClassNotFound');
    const run = await waitForFinished(cluster, ns, 'no-runtime-class', 60_000);
    const took = secondsToComplete(run);
    assert.equal(run.status?.phase, 'Failed');
    assert.equal(run.status?.reason, 'RuntimeClassNotFound');
    assert.ok(
      took >= pendingTimeoutSeconds && took <= pendingTimeoutSeconds + lateBy(reactionMs),
      `took ${took.toFixed(1)} s (the operator's first reaction: ${reactionMs.toFixed(0)} ms)`,
    );
    assert.deepEqual(await podsOf(ops.suite, run), []);
  });

  it('a RuntimeClass whose handler the node lacks: Failed/RuntimeClassNotFound naming the handler, within pendingTimeoutSeconds + 5 s', async () => {
    const { cluster, ns } = ops.suite;
    const pendingTimeoutSeconds = 10;
    const created = Date.now();
    await createRun(
      cluster,
      ns,
      sandboxRun('no-handler', {
        template: 'python',
        code: 'print(1)',
        runtimeClassName: NO_HANDLER_CLASS,
        pendingTimeoutSeconds,
      }),
    );
    const run = await waitForFinished(cluster, ns, 'no-handler', 60_000);
    const elapsed = (Date.now() - created) / 1000;
    assert.equal(run.status?.phase, 'Failed', JSON.stringify(run.status));
    assert.equal(run.status?.reason, 'RuntimeClassNotFound');
    assert.match(
      run.status?.message ?? '',
      new RegExp(`no runtime handler "${ABSENT_HANDLER}" for RuntimeClass "${NO_HANDLER_CLASS}"`),
    );
    assert.ok(elapsed <= pendingTimeoutSeconds + 5, `took ${elapsed.toFixed(1)} s`);
  });

  it('cancel: Cancelled, the pod deleted, the record kept', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('cancelled', {
        template: 'python',
        code: "import time\nprint('started', flush=True)\ntime.sleep(25)",
        timeoutSeconds: 30,
      }),
    );
    const running = await waitForPhase(cluster, ns, 'cancelled', 'Running', 60_000);
    const podName = running.status?.podName ?? '';
    await cancelRun(cluster, ns, 'cancelled');
    const run = await waitForFinished(cluster, ns, 'cancelled', 30_000);
    assert.equal(run.status?.phase, 'Cancelled');
    assert.equal(run.status?.reason, 'Cancelled');
    await cluster
      .waitFor<V1Pod>(
        { path: `/api/v1/namespaces/${ns}/pods`, name: podName },
        (_p, type) => type === 'DELETED',
        {
          timeoutMs: 30_000,
          description: `pod ${podName} to be deleted`,
        },
      )
      .catch(async (e: unknown) => {
        if ((await podsOf(ops.suite, run)).length > 0) throw e;
      });
    assert.deepEqual(await podsOf(ops.suite, run), []);
    const kept = await getRun(cluster, ns, 'cancelled');
    assert.equal(kept?.status?.phase, 'Cancelled');
  });

  it('the pod as stored by the apiserver is hardened; the NetworkPolicy selects exactly it, deny-all', async () => {
    const { cluster, ns } = ops.suite;
    await createRun(
      cluster,
      ns,
      sandboxRun('inspect', {
        template: 'bash',
        code: 'echo "uid=$(id -u) gid=$(id -g)"; ls /sys/class/net',
      }),
    );
    const run = await waitForFinished(cluster, ns, 'inspect', 60_000);
    assert.equal(run.status?.phase, 'Succeeded', JSON.stringify(run.status));
    assert.match(run.status?.output?.tail ?? '', /^uid=1000 gid=1000\n/);
    const pods = await podsOf(ops.suite, run);
    assert.equal(pods.length, 1);
    const pod = pods[0]!;
    const c = pod.spec!.containers[0]!;
    assert.equal(pod.spec?.automountServiceAccountToken, false);
    assert.equal(pod.spec?.enableServiceLinks, false);
    assert.equal(pod.spec?.dnsPolicy, 'None');
    assert.deepEqual(pod.spec?.dnsConfig?.nameservers, ['127.0.0.1']);
    assert.equal(pod.spec?.securityContext?.runAsNonRoot, true);
    assert.equal(pod.spec?.securityContext?.seccompProfile?.type, 'Localhost');
    assert.equal(pod.spec?.securityContext?.seccompProfile?.localhostProfile, 'sandpit/runc.json');
    assert.ok(
      (pod.spec?.volumes ?? [])
        .filter((v) => v.name === 'workspace' || v.name === 'tmp')
        .every((v) => v.emptyDir?.medium === 'Memory'),
      'the workspace and /tmp are memory-backed',
    );
    assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
    assert.equal(c.securityContext?.allowPrivilegeEscalation, false);
    assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL']);
    assert.ok(
      (pod.spec?.volumes ?? []).every((v) => !v.hostPath && !v.projected && !v.secret),
      'no token, no host paths',
    );
    assert.equal(pod.metadata?.ownerReferences?.[0]?.uid, run.metadata?.uid);
    assert.equal(pod.metadata?.ownerReferences?.[0]?.controller, true);

    const nps = (
      await cluster.objects.list<V1NetworkPolicy>('networking.k8s.io/v1', 'NetworkPolicy', ns)
    ).items.filter((n) => n.metadata?.ownerReferences?.[0]?.uid === run.metadata?.uid);
    assert.equal(nps.length, 1);
    const np = nps[0]!;
    assert.deepEqual(np.spec?.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(np.spec?.ingress ?? [], []);
    assert.deepEqual(np.spec?.egress ?? [], []);
    const selector = Object.entries(np.spec?.podSelector?.matchLabels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const selected = (await cluster.core.listNamespacedPod({ namespace: ns, labelSelector: selector })).items;
    assert.deepEqual(
      selected.map((p) => p.metadata?.name),
      [pod.metadata?.name],
      'selects exactly the run’s pod',
    );
  });

  it('Events on the run tell the story', async () => {
    const { cluster, ns } = ops.suite;
    const run = await waitForFinished(cluster, ns, 'fails', 60_000);
    // The Event follows the status write: wait for it, then read them all.
    await cluster.waitFor<CoreV1Event>(
      { path: `/api/v1/namespaces/${ns}/events`, fieldSelector: `involvedObject.uid=${run.metadata?.uid}` },
      (e) => e.reason === 'Failed',
      { timeoutMs: 15_000, description: 'the Failed event' },
    );
    const events = (
      await cluster.core.listNamespacedEvent({
        namespace: ns,
        fieldSelector: `involvedObject.uid=${run.metadata?.uid}`,
      })
    ).items;
    const reasons = events.map((e) => e.reason);
    assert.ok(reasons.includes('CreatedPod'), reasons.join(','));
    assert.ok(reasons.includes('Failed'), reasons.join(','));
    assert.ok(
      events.every(
        (e) => e.involvedObject.kind === 'SandboxRun' && e.reportingInstance === ops.suite.operator.identity,
      ),
    );
    // The audit line is written to the operator's stderr, which may reach us after the Event.
    await ops.suite.operator.waitForLog(
      (l) => auditOf(l)?.event === 'run' && auditOf(l)?.runId === `${ns}/fails` && auditOf(l)?.exitCode === 3,
      10_000,
      'the audit record of the failed run',
    );
  });
});
