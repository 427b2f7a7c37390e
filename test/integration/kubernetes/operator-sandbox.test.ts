// Sandboxes (sessions) on the real cluster, reconciled by the real operator with its own RBAC
// identity: the kubectl sample becomes Ready in a hardened pod that kubectl exec enters as 1000
// with a read-only root; TTL and idle expiry (from a Lease the test writes); the API refuses an
// idle timeout under 60; spec.cancel; ttlSecondsAfterFinished; a missing image; a pod deleted from
// outside; a spec the policy refuses. Events and observedGeneration throughout.
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe } from 'node:test';
import type { CoreV1Event, V1NetworkPolicy } from '@kubernetes/client-node';
import { microTime } from '../../../src/controller/leader-election.js';
import type { Sandbox } from '../../../src/api/v1alpha1/sandbox.js';
import { IDLE_SLACK_SECONDS } from '../../../src/api/v1alpha1/sandbox.js';
import { DEFAULT_SESSION_CEILINGS } from '../../../src/policy/policy.js';
import { httpStatus, REPO_ROOT } from '../../support/kube/index.js';
import { createTimed, lateBy, operatorSuite, sandboxRun, type Suite } from './operator-harness.js';
import {
  cancelSandbox,
  createSandbox,
  getSandbox,
  sandbox,
  secondsSinceCreation,
  sessionPods,
  setSandboxTtl,
  waitForEnd,
  waitForReady,
  waitForSandbox,
  waitNoPods,
} from './sandbox-harness.js';

/** The operator's start grace (kubernetes.operator.startGraceSeconds, its default). */
const START_GRACE_SECONDS = 120;

async function eventsOf(s: Suite, obj: Sandbox): Promise<CoreV1Event[]> {
  return (await s.cluster.core.listNamespacedEvent({ namespace: s.ns })).items.filter(
    (e) => e.involvedObject.kind === 'Sandbox' && e.involvedObject.uid === obj.metadata?.uid,
  );
}

/** Waits for an Event on the Sandbox (the operator writes it right after the status). */
async function expectEvent(
  s: Suite,
  obj: Sandbox,
  type: 'Normal' | 'Warning',
  reason: string,
): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if ((await eventsOf(s, obj)).some((e) => e.type === type && e.reason === reason)) return;
    if (Date.now() > deadline) assert.fail(`no ${type} Event ${reason} on Sandbox ${obj.metadata?.name}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function assertGenerations(s: Sandbox): void {
  const generation = s.metadata?.generation;
  assert.equal(s.status?.observedGeneration, generation, 'status.observedGeneration');
  for (const c of s.status?.conditions ?? [])
    assert.equal(c.observedGeneration, generation, `condition ${c.type}: observedGeneration`);
}

const condition = (s: Sandbox, type: string) => s.status?.conditions?.find((c) => c.type === type);

/** The operator's reaction time on this machine, as loaded now (bounds on lateness scale from it). */
async function reaction(s: Suite): Promise<number> {
  const name = `probe-${Math.random().toString(16).slice(2, 8)}`;
  return createTimed(s.cluster, s.ns, sandboxRun(name, { template: 'bash', code: 'true' }));
}

describe('Sandboxes on the real cluster', { timeout: 300_000 }, () => {
  const ops = operatorSuite('operator-sandbox');
  const { it } = ops;

  it('kubectl apply of the sample: Ready in a hardened pod; kubectl exec is uid 1000, read-only root, writable /workspace; spec.cancel ends it Deleted', async () => {
    const { cluster, ns } = ops.suite;
    const applied = await cluster.kubectl([
      'apply',
      '-n',
      ns,
      '-f',
      path.join(REPO_ROOT, 'deploy/samples/sandbox.yaml'),
    ]);
    assert.equal(applied.code, 0, applied.stderr);
    const ready = await waitForReady(cluster, ns, 'python-session');
    const st = ready.status ?? {};
    assert.equal(st.phase, 'Ready', JSON.stringify(st));
    assert.equal(condition(ready, 'Ready')?.status, 'True');
    assert.equal(condition(ready, 'Reconciling')?.status, 'False');
    assert.equal(condition(ready, 'Stalled')?.status, 'False');
    assert.equal(condition(ready, 'Admitted')?.status, 'True');
    assertGenerations(ready);
    assert.equal(secondsSinceCreation(ready, st.expiresAt), 1800, 'expiresAt = creation + ttlSeconds');
    assert.ok(st.readyTime && secondsSinceCreation(ready, st.readyTime) >= 0);
    assert.equal(st.lastActivity, undefined, 'no Lease, no activity');

    // The pod: the run pod's hardening, the session runner on an open stdin, owned by the Sandbox.
    const pod = await cluster.core.readNamespacedPod({ namespace: ns, name: st.podName ?? '' });
    const spec = pod.spec!;
    const c = spec.containers[0]!;
    // The pod carries the policy's TTL ceiling (a deadline cannot be raised; an extension may come).
    const ceiling = DEFAULT_SESSION_CEILINGS.maxTtlSeconds;
    assert.deepEqual(c.command, [
      '/usr/local/bin/sandpit-runner',
      '--session',
      '--open-within',
      String(ceiling),
    ]);
    assert.equal(c.stdin, true);
    assert.equal(c.stdinOnce ?? false, false, 'stdinOnce false: a gateway can attach again');
    assert.equal(c.tty ?? false, false);
    assert.equal(spec.activeDeadlineSeconds, ceiling + START_GRACE_SECONDS);
    assert.equal(spec.restartPolicy, 'Never');
    assert.equal(spec.automountServiceAccountToken, false);
    assert.equal(spec.enableServiceLinks, false);
    assert.equal(spec.dnsPolicy, 'None');
    assert.deepEqual(spec.dnsConfig?.nameservers, ['127.0.0.1']);
    assert.equal(spec.securityContext?.runAsNonRoot, true);
    assert.equal(spec.securityContext?.runAsUser, 1000);
    assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
    assert.equal(c.securityContext?.allowPrivilegeEscalation, false);
    assert.equal(c.securityContext?.privileged, false);
    assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL']);
    assert.ok(c.securityContext?.seccompProfile?.type, 'a seccomp profile');
    assert.deepEqual(c.resources?.limits, { cpu: '500m', memory: '256Mi' });
    assert.equal(pod.metadata?.labels?.['sandpit.dev/session'], 'python-session');
    assert.equal(pod.metadata?.labels?.['sandpit.dev/session-uid'], ready.metadata?.uid);
    assert.equal(pod.metadata?.labels?.['sandpit.dev/managed-by'], 'sandpit-operator');
    const owner = pod.metadata?.ownerReferences?.[0];
    assert.deepEqual(
      { kind: owner?.kind, uid: owner?.uid, controller: owner?.controller },
      { kind: 'Sandbox', uid: ready.metadata?.uid, controller: true },
    );
    const np = await cluster.objects.read<V1NetworkPolicy>({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: st.podName ?? '', namespace: ns },
    });
    assert.deepEqual(np.spec?.podSelector?.matchLabels, { 'sandpit.dev/session-uid': ready.metadata?.uid });
    assert.deepEqual([...(np.spec?.policyTypes ?? [])].sort(), ['Egress', 'Ingress']);
    assert.equal((np.spec?.ingress ?? []).length + (np.spec?.egress ?? []).length, 0, 'deny-all');

    // kubectl exec: the sandbox user, the same limits.
    const exec = await cluster.kubectl([
      'exec',
      '-n',
      ns,
      st.podName ?? '',
      '--',
      'sh',
      '-c',
      'id -u; touch /rootfs-probe 2>/dev/null && echo writable || echo read-only; echo kept > /workspace/f && cat /workspace/f; python3 -c "print(6*7)"',
    ]);
    assert.equal(exec.code, 0, exec.stderr);
    assert.equal(exec.stdout, '1000\nread-only\nkept\n42\n');

    await expectEvent(ops.suite, ready, 'Normal', 'CreatedPod');
    await expectEvent(ops.suite, ready, 'Normal', 'Ready');

    await cancelSandbox(cluster, ns, 'python-session');
    const ended = await waitForEnd(cluster, ns, 'python-session');
    assert.equal(ended.status?.phase, 'Deleted', JSON.stringify(ended.status));
    assert.equal(ended.status?.reason, 'Deleted');
    assert.equal(condition(ended, 'Ready')?.status, 'False');
    assert.ok(ended.status?.finishedTime);
    assert.equal(ended.metadata?.generation, 2, 'the cancel patch is a new generation');
    assertGenerations(ended);
    await waitNoPods(cluster, ns, ended);
    await expectEvent(ops.suite, ended, 'Normal', 'Deleted');
  });

  it('ttlSeconds, changed once Ready (a new generation): Expired/TTLExpired at the new expiresAt, its pod deleted; ttlSecondsAfterFinished then removes it', async () => {
    const { cluster, ns } = ops.suite;
    const reactionMs = await reaction(ops.suite);
    const ttlSeconds = 12;
    await createSandbox(
      cluster,
      ns,
      sandbox('short', { template: 'bash', ttlSeconds: 600, ttlSecondsAfterFinished: 2 }),
    );
    const ready = await waitForReady(cluster, ns, 'short');
    assert.equal(secondsSinceCreation(ready, ready.status?.expiresAt), 600);
    await setSandboxTtl(cluster, ns, 'short', ttlSeconds);
    const moved = await waitForSandbox(
      cluster,
      ns,
      'short',
      (s) => (s.status?.observedGeneration ?? 0) > (ready.metadata?.generation ?? 1),
      'the operator to observe the new generation',
    );
    assert.equal(secondsSinceCreation(moved, moved.status?.expiresAt), ttlSeconds, 'expiresAt recomputed');
    const ended = await waitForEnd(cluster, ns, 'short', 60_000);
    assert.equal(ended.status?.phase, 'Expired', JSON.stringify(ended.status));
    assert.equal(ended.status?.reason, 'TTLExpired');
    const took = secondsSinceCreation(ended, ended.status?.finishedTime);
    assert.ok(
      took >= ttlSeconds && took <= ttlSeconds + lateBy(reactionMs),
      `ended ${took.toFixed(1)} s after creation (TTL ${ttlSeconds} s; reaction ${reactionMs.toFixed(0)} ms)`,
    );
    assertGenerations(ended);
    await expectEvent(ops.suite, ended, 'Normal', 'Expired');
    const deadline = Date.now() + 30_000;
    while ((await getSandbox(cluster, ns, 'short')) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 250));
    assert.equal(await getSandbox(cluster, ns, 'short'), undefined, 'ttlSecondsAfterFinished deleted it');
    await waitNoPods(cluster, ns, ended);
  });

  it("idleTimeoutSeconds: Expired/IdleExpired at the Lease's renewTime + idle + slack; lastActivity is the renewTime", async () => {
    const { cluster, ns } = ops.suite;
    const reactionMs = await reaction(ops.suite);
    const idle = 60;
    await createSandbox(
      cluster,
      ns,
      sandbox('idler', { template: 'bash', ttlSeconds: 600, idleTimeoutSeconds: idle }),
    );
    const ready = await waitForReady(cluster, ns, 'idler');
    assert.equal(ready.status?.phase, 'Ready');
    // The gateway's Lease, as it writes one: same name, labelled, owned by the Sandbox; renewed
    // (idle + slack - 4) s ago, so the session has 4 s left.
    const renewed = new Date(Date.now() - (idle + IDLE_SLACK_SECONDS - 4) * 1000);
    const lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: 'idler',
        labels: { 'sandpit.dev/session': 'idler' },
        ownerReferences: [
          {
            apiVersion: 'sandpit.dev/v1alpha1',
            kind: 'Sandbox',
            name: 'idler',
            uid: ready.metadata?.uid ?? '',
          },
        ],
      },
      spec: {
        holderIdentity: 'test-gateway',
        leaseDurationSeconds: 30,
        renewTime: microTime(renewed.getTime()),
      },
    };
    const created = await cluster.kubectl(['create', '-n', ns, '-f', '-'], { input: JSON.stringify(lease) });
    assert.equal(created.code, 0, created.stderr);
    const seen = await waitForSandbox(
      cluster,
      ns,
      'idler',
      (s) => s.status?.lastActivity !== undefined || s.status?.phase !== 'Ready',
      'to see the Lease',
    );
    assert.equal(seen.status?.lastActivity, renewed.toISOString());
    const ended = await waitForEnd(cluster, ns, 'idler', 60_000);
    assert.equal(ended.status?.phase, 'Expired', JSON.stringify(ended.status));
    assert.equal(ended.status?.reason, 'IdleExpired');
    const due = renewed.getTime() + (idle + IDLE_SLACK_SECONDS) * 1000;
    const late = (Date.parse(ended.status?.finishedTime ?? '') - due) / 1000;
    assert.ok(
      late >= -1 && late <= lateBy(reactionMs),
      `ended ${late.toFixed(1)} s after renewTime + idle + slack`,
    );
    await waitNoPods(cluster, ns, ended);
  });

  it('the API refuses idleTimeoutSeconds under 60 (the CRD minimum)', async () => {
    const { cluster, ns } = ops.suite;
    const refused = await createSandbox(
      cluster,
      ns,
      sandbox('too-eager', { template: 'bash', idleTimeoutSeconds: 30 }),
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.equal(httpStatus(refused), 422, String(refused));
    assert.match(String((refused as { body?: unknown }).body ?? refused), /idleTimeoutSeconds/);
    assert.equal(await getSandbox(cluster, ns, 'too-eager'), undefined);
  });

  it('a pod deleted from outside: the Sandbox ends Failed with a Warning', async () => {
    const { cluster, ns } = ops.suite;
    await createSandbox(cluster, ns, sandbox('orphaned', { template: 'bash', ttlSeconds: 600 }));
    const ready = await waitForReady(cluster, ns, 'orphaned');
    assert.equal(ready.status?.phase, 'Ready');
    await cluster.core.deleteNamespacedPod({ namespace: ns, name: ready.status?.podName ?? '' });
    const ended = await waitForEnd(cluster, ns, 'orphaned');
    assert.equal(ended.status?.phase, 'Failed', JSON.stringify(ended.status));
    assert.ok(['RunnerGone', 'ContainerFailed'].includes(ended.status?.reason ?? ''), ended.status?.reason);
    assert.equal(condition(ended, 'Stalled')?.status, 'True');
    assert.equal(condition(ended, 'Ready')?.status, 'False');
    await expectEvent(ops.suite, ended, 'Warning', 'Failed');
    await waitNoPods(cluster, ns, ended);
    assert.equal((await sessionPods(cluster, ns, ended)).length, 0, 'no new pod was made for it');
  });

  it('an image that does not exist (imagePullPolicy Never): Failed/ImageNotFound, its pod deleted', async () => {
    const { cluster, ns } = ops.suite;
    await createSandbox(
      cluster,
      ns,
      sandbox('no-image', { image: 'sandpit/python:0.0-missing', pendingTimeoutSeconds: 30 }),
    );
    const ended = await waitForEnd(cluster, ns, 'no-image', 60_000);
    assert.equal(ended.status?.phase, 'Failed', JSON.stringify(ended.status));
    assert.equal(ended.status?.reason, 'ImageNotFound');
    assert.match(ended.status?.message ?? '', /ErrImageNeverPull/);
    assert.ok(
      secondsSinceCreation(ended, ended.status?.finishedTime) < 30,
      'it did not wait for the timeout',
    );
    await waitNoPods(cluster, ns, ended);
  });

  it('a live Sandbox whose ttlSeconds is edited over the ceiling: Failed/PolicyDenied, as a create over it', async () => {
    const { cluster, ns } = ops.suite;
    await createSandbox(cluster, ns, sandbox('stretched', { template: 'bash', ttlSeconds: 600 }));
    await waitForReady(cluster, ns, 'stretched');
    await setSandboxTtl(cluster, ns, 'stretched', DEFAULT_SESSION_CEILINGS.maxTtlSeconds + 1);
    const ended = await waitForEnd(cluster, ns, 'stretched');
    assert.deepEqual([ended.status?.phase, ended.status?.reason], ['Failed', 'PolicyDenied']);
    assert.match(ended.status?.message ?? '', /ttlSeconds/);
    assert.equal(condition(ended, 'Admitted')?.status, 'False');
    assertGenerations(ended);
    await waitNoPods(cluster, ns, ended);
  });

  it('a spec the policy refuses: Failed/PolicyDenied naming the field, no pod', async () => {
    const { cluster, ns } = ops.suite;
    await createSandbox(
      cluster,
      ns,
      sandbox('greedy', { template: 'python', resources: { memory: '64Gi' } }),
    );
    const ended = await waitForEnd(cluster, ns, 'greedy');
    assert.equal(ended.status?.phase, 'Failed', JSON.stringify(ended.status));
    assert.equal(ended.status?.reason, 'PolicyDenied');
    assert.match(ended.status?.message ?? '', /resources\.memory/);
    assert.equal(condition(ended, 'Admitted')?.status, 'False');
    assertGenerations(ended);
    assert.equal(ended.status?.podName, undefined);
    assert.equal((await sessionPods(cluster, ns, ended)).length, 0);
    await expectEvent(ops.suite, ended, 'Warning', 'Failed');
  });
});
