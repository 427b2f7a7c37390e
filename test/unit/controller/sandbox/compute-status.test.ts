import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from '../../../../src/kube/objects.js';
import type { SandboxStatus } from '../../../../src/api/v1alpha1/sandbox.js';
import {
  computeSandboxStatus,
  idleExpiresAt,
  sandboxRequeueMs,
  type SandboxStatusInput,
} from '../../../../src/controller/sandbox/compute-status.js';
import { observePod } from '../../../../src/controller/pod/observe-pod.js';
import { evaluateSandbox } from '../../../../src/controller/sandbox/evaluate-sandbox.js';
import { createPolicy } from '../../../../src/policy/policy.js';
import { RUNNER_EXIT } from '../../../../src/runner/session-protocol.js';

const CREATED = '2026-01-01T00:00:00.000Z';
const at = (s: number): string => new Date(Date.parse(CREATED) + s * 1000).toISOString();

function pod(status: Pod['status'], deleting = false): ReturnType<typeof observePod> {
  return observePod({
    metadata: { name: 'sbx-abcde', uid: 'p1', ...(deleting ? { deletionTimestamp: at(1) } : {}) },
    status,
  });
}

const running = (ready = true) =>
  pod({
    phase: 'Running',
    conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
    containerStatuses: [
      {
        name: 'sandbox',
        image: 'i',
        imageID: '',
        ready,
        restartCount: 0,
        state: { running: { startedAt: at(1) } },
      },
    ],
  });

const exited = (exitCode: number, reason = 'Error', message?: string) =>
  pod({
    phase: exitCode === 0 ? 'Succeeded' : 'Failed',
    containerStatuses: [
      {
        name: 'sandbox',
        image: 'i',
        imageID: '',
        ready: false,
        restartCount: 0,
        state: { terminated: { exitCode, reason, message, startedAt: at(1), finishedAt: at(5) } },
      },
    ],
  });

function input(over: Partial<SandboxStatusInput> = {}): SandboxStatusInput {
  return {
    generation: 1,
    createdAt: CREATED,
    current: {},
    verdict: { allowed: true },
    cancel: false,
    pendingTimeoutSeconds: 60,
    ttlSeconds: 300,
    idleTimeoutSeconds: undefined,
    podName: 'sbx-abcde',
    pod: undefined,
    blocked: undefined,
    podLost: false,
    renewTime: undefined,
    runnerAnswered: true,
    now: at(1),
    ...over,
  };
}

const cond = (s: SandboxStatus, type: string) => s.conditions?.find((c) => c.type === type);

describe('computeSandboxStatus', () => {
  test('no pod yet: Creating, Reconciling, expiresAt = creation + ttlSeconds; every condition carries the generation', () => {
    const s = computeSandboxStatus(input({ generation: 3 }));
    assert.equal(s.phase, 'Creating');
    assert.equal(s.reason, undefined);
    assert.equal(s.expiresAt, at(300));
    assert.equal(s.podName, undefined);
    assert.equal(cond(s, 'Ready')?.status, 'False');
    assert.equal(cond(s, 'Reconciling')?.status, 'True');
    assert.equal(cond(s, 'Stalled')?.status, 'False');
    assert.equal(cond(s, 'Admitted')?.status, 'True');
    assert.equal(s.observedGeneration, 3);
    assert.ok(s.conditions?.every((c) => c.observedGeneration === 3));
  });

  test('served: warm with its pool once a pool pod is claimed, cold once a pod of its own exists, then kept', () => {
    assert.equal(computeSandboxStatus(input()).served, undefined);
    const warm = computeSandboxStatus(input({ pod: running(), claimedFrom: 'py', podName: 'py-x1' }));
    assert.deepEqual([warm.served, warm.pool, warm.podName], ['warm', 'py', 'py-x1']);
    const cold = computeSandboxStatus(input({ pod: running() }));
    assert.deepEqual([cold.served, cold.pool], ['cold', undefined]);
    const later = computeSandboxStatus(
      input({ current: warm, pod: running(), podName: 'py-x1', now: at(9) }),
    );
    assert.deepEqual([later.served, later.pool], ['warm', 'py']);
  });

  test('the pod is Ready but its runner has not answered yet: still Creating, Ready False', () => {
    const s = computeSandboxStatus(input({ pod: running(), runnerAnswered: false, now: at(4) }));
    assert.equal(s.phase, 'Creating');
    assert.match(s.message ?? '', /waiting for its runner to answer/);
    assert.equal(s.readyTime, undefined);
    assert.equal(cond(s, 'Ready')?.status, 'False');
  });

  test('the pod is Ready and the runner answered: Ready with readyTime now, kept on later passes', () => {
    const s = computeSandboxStatus(input({ pod: running(), now: at(4) }));
    assert.equal(s.phase, 'Ready');
    assert.equal(s.readyTime, at(4));
    assert.equal(s.podName, 'sbx-abcde');
    assert.equal(cond(s, 'Ready')?.status, 'True');
    assert.equal(cond(s, 'Reconciling')?.status, 'False');
    // Once Ready, the frame is not looked for again.
    const again = computeSandboxStatus(
      input({ current: s, pod: running(), runnerAnswered: false, now: at(9) }),
    );
    assert.deepEqual(again, s, 'nothing changed: the same status (no write)');
  });

  test('a running pod not Ready yet is still Creating', () => {
    assert.equal(computeSandboxStatus(input({ pod: running(false) })).phase, 'Creating');
  });

  test('the policy refuses it: Failed/PolicyDenied, Admitted False, Stalled True', () => {
    const s = computeSandboxStatus(
      input({
        verdict: { allowed: false, message: 'denied by policy: resources.memory: too much' },
        ttlSeconds: undefined,
      }),
    );
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'PolicyDenied');
    assert.match(s.message ?? '', /resources\.memory/);
    assert.equal(cond(s, 'Admitted')?.status, 'False');
    assert.equal(cond(s, 'Stalled')?.status, 'True');
    assert.equal(s.finishedTime, at(1));
  });

  test('spec.cancel: Deleted', () => {
    const ready = computeSandboxStatus(input({ pod: running() }));
    const s = computeSandboxStatus(input({ current: ready, cancel: true, now: at(7) }));
    assert.equal(s.phase, 'Deleted');
    assert.equal(s.reason, 'Deleted');
    assert.equal(s.finishedTime, at(7));
    assert.equal(cond(s, 'Ready')?.status, 'False');
    assert.equal(cond(s, 'Stalled')?.status, 'False');
  });

  test('ttlSeconds reached: Expired/TTLExpired at expiresAt, not a moment before', () => {
    const ready = computeSandboxStatus(input({ pod: running() }));
    assert.equal(
      computeSandboxStatus(input({ current: ready, pod: running(), now: at(299.9) })).phase,
      'Ready',
    );
    const s = computeSandboxStatus(input({ current: ready, pod: running(), now: at(300) }));
    assert.equal(s.phase, 'Expired');
    assert.equal(s.reason, 'TTLExpired');
  });

  test('idle: only with idleTimeoutSeconds; from the Lease renewTime (else readyTime) + idle + 10 s slack', () => {
    const ready = computeSandboxStatus(input({ pod: running(), now: at(2) }));
    const noIdle = computeSandboxStatus(input({ current: ready, pod: running(), now: at(250) }));
    assert.equal(noIdle.phase, 'Ready', 'no idleTimeoutSeconds: no idle end');
    const idle = { idleTimeoutSeconds: 60 };
    assert.equal(
      computeSandboxStatus(input({ ...idle, current: ready, pod: running(), now: at(71.9) })).phase,
      'Ready',
    );
    const fromReady = computeSandboxStatus(input({ ...idle, current: ready, pod: running(), now: at(72) }));
    assert.equal(fromReady.phase, 'Expired');
    assert.equal(fromReady.reason, 'IdleExpired');
    const renewTime = '2026-01-01T00:01:00.000000Z';
    const active = computeSandboxStatus(
      input({ ...idle, current: ready, pod: running(), renewTime, now: at(129) }),
    );
    assert.equal(active.phase, 'Ready');
    assert.equal(active.lastActivity, at(60), 'lastActivity is the renewTime');
    assert.equal(idleExpiresAt(active, 60), at(130));
    const s = computeSandboxStatus(
      input({ ...idle, current: active, pod: running(), renewTime, now: at(130) }),
    );
    assert.equal(s.reason, 'IdleExpired');
  });

  test('the pod ended: the reason from the runner exit status and the pod', () => {
    const ended = (p: ReturnType<typeof pod>) => {
      const s = computeSandboxStatus(input({ pod: p }));
      return [s.phase, s.reason];
    };
    assert.deepEqual(ended(exited(RUNNER_EXIT.ttl)), ['Expired', 'TTLExpired']);
    assert.deepEqual(ended(exited(RUNNER_EXIT.idle)), ['Expired', 'IdleExpired']);
    assert.deepEqual(ended(exited(RUNNER_EXIT.closed, 'Completed')), ['Deleted', 'Deleted']);
    assert.deepEqual(ended(exited(RUNNER_EXIT.neverOpened)), ['Expired', 'TTLExpired'], 'nobody opened it');
    assert.deepEqual(ended(exited(137, 'OOMKilled')), ['Failed', 'OOMKilled']);
    assert.deepEqual(ended(exited(137)), ['Failed', 'ContainerFailed']);
    assert.deepEqual(ended(exited(2)), ['Failed', 'RunnerGone']);
    assert.deepEqual(ended(pod({ phase: 'Failed', reason: 'DeadlineExceeded' })), ['Expired', 'TTLExpired']);
    assert.deepEqual(ended(pod({ phase: 'Failed', reason: 'Evicted', message: 'low memory' })), [
      'Failed',
      'ContainerFailed',
    ]);
  });

  test('the runner refused a sandbox with a network (no NetworkPolicy enforced): Failed/BackendError naming the interface and the fix', () => {
    const failure = JSON.stringify({
      failure:
        'network interface eth0 exists although egress is none: this sandbox is not isolated from the network',
    });
    const s = computeSandboxStatus(input({ pod: exited(RUNNER_EXIT.failed, 'Error', failure) }));
    assert.deepEqual([s.phase, s.reason], ['Failed', 'BackendError']);
    assert.match(s.message ?? '', /network interface eth0 .* so the session was refused before it started/);
    assert.match(s.message ?? '', /networkPolicy\.enforced: true/);
    assert.equal(cond(s, 'Stalled')?.status, 'True');
    // Any other failure of the runner is its own end, as before.
    const other = JSON.stringify({ failure: 'cannot list the interfaces' });
    assert.deepEqual(
      [computeSandboxStatus(input({ pod: exited(RUNNER_EXIT.failed, 'Error', other) })).reason],
      ['RunnerGone'],
    );
  });

  test('a lost pod, or one deleted from outside: Failed/RunnerGone', () => {
    const ready = computeSandboxStatus(input({ pod: running() }));
    assert.equal(computeSandboxStatus(input({ current: ready, podLost: true })).reason, 'RunnerGone');
    const deleting = pod({ phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] }, true);
    const s = computeSandboxStatus(input({ current: ready, pod: deleting }));
    assert.deepEqual([s.phase, s.reason], ['Failed', 'RunnerGone']);
  });

  test('pending: a missing image fails at once; otherwise the pending timeout ends it', () => {
    const noImage = pod({
      phase: 'Pending',
      containerStatuses: [
        {
          name: 'sandbox',
          image: 'i',
          imageID: '',
          ready: false,
          restartCount: 0,
          state: { waiting: { reason: 'ErrImageNeverPull', message: 'not present' } },
        },
      ],
    });
    const s = computeSandboxStatus(input({ pod: noImage }));
    assert.deepEqual([s.phase, s.reason], ['Failed', 'ImageNotFound']);
    const waiting = pod({ phase: 'Pending' });
    assert.equal(computeSandboxStatus(input({ pod: waiting, now: at(59) })).phase, 'Creating');
    const late = computeSandboxStatus(input({ pod: waiting, now: at(60) }));
    assert.deepEqual([late.phase, late.reason], ['Failed', 'PendingTimeout']);
    assert.match(late.message ?? '', /did not become ready within 60s/);
    const quota = computeSandboxStatus(
      input({
        blocked: { reason: 'QuotaExceeded', message: 'exceeded quota', permanent: false },
        now: at(60),
      }),
    );
    assert.deepEqual([quota.phase, quota.reason], ['Failed', 'BackendError'], 'in the session reasons');
  });

  test('an ended status never changes; observedGeneration follows the spec', () => {
    const ended = computeSandboxStatus(input({ cancel: true }));
    const later = computeSandboxStatus(input({ current: ended, generation: 2, pod: running(), now: at(99) }));
    assert.deepEqual(later, { ...ended, observedGeneration: 2 });
  });

  test('a changed spec.ttlSeconds (a new generation): expiresAt recomputed, the session lives on to it, and the requeue moves', () => {
    const ready = computeSandboxStatus(input({ ttlSeconds: 10, pod: running(), now: at(2) }));
    assert.equal(ready.expiresAt, at(10));
    const timing = {
      createdAt: CREATED,
      pendingTimeoutSeconds: 60,
      idleTimeoutSeconds: undefined,
      ttlSecondsAfterFinished: undefined,
    };
    assert.equal(sandboxRequeueMs(ready, { ...timing, now: at(2) }), 8_000);
    const extended = computeSandboxStatus(
      input({ generation: 2, ttlSeconds: 30, current: ready, pod: running(), now: at(5) }),
    );
    assert.deepEqual([extended.phase, extended.expiresAt, extended.observedGeneration], ['Ready', at(30), 2]);
    assert.equal(sandboxRequeueMs(extended, { ...timing, now: at(5) }), 25_000, 'the requeue moved');
    const pastOld = computeSandboxStatus(
      input({ generation: 2, ttlSeconds: 30, current: extended, pod: running(), now: at(10) }),
    );
    assert.equal(pastOld.phase, 'Ready', 'alive past the old expiry');
    const atNew = computeSandboxStatus(
      input({ generation: 2, ttlSeconds: 30, current: pastOld, pod: running(), now: at(30) }),
    );
    assert.deepEqual([atNew.phase, atNew.reason], ['Expired', 'TTLExpired']);
    assert.match(atNew.message ?? '', /\(30s\)/);
  });

  test('a spec.ttlSeconds edited over the policy ceiling is refused as a create over it is: Failed/PolicyDenied', () => {
    const policy = createPolicy();
    const ceiling = policy.sessions.maxTtlSeconds;
    const ready = computeSandboxStatus(input({ pod: running(), now: at(2) }));
    const verdict = evaluateSandbox({ template: 'bash', ttlSeconds: ceiling + 1 }, policy, {
      networkPolicyEnforced: true,
    });
    assert.equal(verdict.allowed, false);
    if (verdict.allowed) return;
    assert.ok(
      verdict.violations.some((v) => v.field === 'ttlSeconds'),
      JSON.stringify(verdict.violations),
    );
    const s = computeSandboxStatus(
      input({
        generation: 2,
        verdict: { allowed: false, message: verdict.message },
        ttlSeconds: undefined,
        current: ready,
        pod: running(),
        now: at(3),
      }),
    );
    assert.deepEqual([s.phase, s.reason, s.observedGeneration], ['Failed', 'PolicyDenied', 2]);
    assert.equal(cond(s, 'Admitted')?.status, 'False');
  });
});

describe('sandboxRequeueMs', () => {
  const timing = {
    createdAt: CREATED,
    pendingTimeoutSeconds: 60,
    idleTimeoutSeconds: undefined as number | undefined,
    ttlSecondsAfterFinished: undefined as number | undefined,
    now: at(10),
  };
  test('Creating: the pending deadline (or the TTL when sooner)', () => {
    assert.equal(sandboxRequeueMs({ phase: 'Creating', expiresAt: at(300) }, timing), 50_000);
    assert.equal(sandboxRequeueMs({ phase: 'Creating', expiresAt: at(20) }, timing), 10_000);
  });
  test('Ready: the TTL, or the idle end when sooner', () => {
    const ready: SandboxStatus = { phase: 'Ready', expiresAt: at(300), readyTime: at(5) };
    assert.equal(sandboxRequeueMs(ready, timing), 290_000);
    assert.equal(sandboxRequeueMs(ready, { ...timing, idleTimeoutSeconds: 60 }), 65_000);
  });
  test('ended: the TTL after finishing, else nothing', () => {
    const ended: SandboxStatus = { phase: 'Expired', finishedTime: at(8) };
    assert.equal(sandboxRequeueMs(ended, timing), undefined);
    assert.equal(sandboxRequeueMs(ended, { ...timing, ttlSecondsAfterFinished: 5 }), 3_000);
  });
});
