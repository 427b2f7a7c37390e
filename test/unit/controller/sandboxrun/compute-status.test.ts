import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from '../../../../src/kube/objects.js';
import type { SandboxRunStatus } from '../../../../src/api/v1alpha1/sandboxrun.js';
import {
  computeStatus,
  finishRecordedAt,
  requeueAfterMs,
  type StatusInput,
} from '../../../../src/controller/sandboxrun/compute-status.js';
import { observePod } from '../../../../src/controller/pod/observe-pod.js';

const CREATED = '2026-01-01T00:00:00Z';
const at = (s: number): string => new Date(Date.parse(CREATED) + s * 1000).toISOString();

function input(over: Partial<StatusInput> = {}): StatusInput {
  return {
    generation: 1,
    createdAt: CREATED,
    current: {},
    verdict: { allowed: true },
    cancel: false,
    pendingTimeoutSeconds: 60,
    podName: 'hello-abcde',
    pod: undefined,
    blocked: undefined,
    podLost: false,
    output: undefined,
    now: at(1),
    ...over,
  };
}

const report = (r: Record<string, unknown>): string =>
  JSON.stringify({
    exitCode: 0,
    signal: 0,
    timedOut: false,
    oomKilled: false,
    stdoutBytes: 0,
    stderrBytes: 0,
    durationMs: 5,
    ...r,
  });

function pod(status: Pod['status']): ReturnType<typeof observePod> {
  return observePod({ metadata: { name: 'hello-abcde', uid: 'p1' }, status });
}

const terminated = (
  exitCode: number,
  message?: string,
  reason = exitCode ? 'Error' : 'Completed',
  podStatus: Pod['status'] = {},
) =>
  pod({
    phase: exitCode === 0 ? 'Succeeded' : 'Failed',
    ...podStatus,
    containerStatuses: [
      {
        name: 'sandbox',
        ready: false,
        restartCount: 0,
        image: 'i',
        imageID: 'i',
        state: {
          terminated: {
            exitCode,
            reason,
            ...(message ? { message } : {}),
            startedAt: at(2),
            finishedAt: at(3),
          },
        },
      },
    ],
  });

const waiting = (reason: string, message = '') =>
  pod({
    phase: 'Pending',
    containerStatuses: [
      {
        name: 'sandbox',
        ready: false,
        restartCount: 0,
        image: 'i',
        imageID: '',
        state: { waiting: { reason, message } },
      },
    ],
  });

const OUTPUT = { tail: 'hi\n', truncated: false, bytes: 3 };
const cond = (s: SandboxRunStatus, type: string) => s.conditions?.find((c) => c.type === type);

describe('computeStatus: the program’s outcome', () => {
  const cases: {
    name: string;
    pod: ReturnType<typeof observePod>;
    phase: string;
    reason: string;
    exitCode?: number;
  }[] = [
    { name: 'exit 0', pod: terminated(0, report({})), phase: 'Succeeded', reason: 'Completed', exitCode: 0 },
    {
      name: 'exit 3',
      pod: terminated(3, report({ exitCode: 3 })),
      phase: 'Failed',
      reason: 'Error',
      exitCode: 3,
    },
    {
      name: 'the runner’s deadline',
      pod: terminated(137, report({ exitCode: 137, signal: 9, timedOut: true })),
      phase: 'TimedOut',
      reason: 'DeadlineExceeded',
      exitCode: 137,
    },
    {
      name: 'activeDeadlineSeconds (pod reason DeadlineExceeded, no report)',
      pod: terminated(137, undefined, 'Error', {
        reason: 'DeadlineExceeded',
        message: 'Pod was active on the node longer than…',
      }),
      phase: 'TimedOut',
      reason: 'DeadlineExceeded',
      exitCode: 137,
    },
    {
      name: 'OOM seen by the runner',
      pod: terminated(137, report({ exitCode: 137, signal: 9, oomKilled: true })),
      phase: 'Failed',
      reason: 'OOMKilled',
      exitCode: 137,
    },
    {
      name: 'OOM seen by the kubelet',
      pod: terminated(137, undefined, 'OOMKilled'),
      phase: 'Failed',
      reason: 'OOMKilled',
      exitCode: 137,
    },
    {
      name: 'the runner itself failed (125, no report)',
      pod: terminated(125),
      phase: 'Failed',
      reason: 'BackendError',
      exitCode: 125,
    },
    {
      name: 'evicted (workspace over its size limit)',
      pod: terminated(137, undefined, 'Error', {
        reason: 'Evicted',
        message: 'Usage of EmptyDir volume "workspace" exceeds the limit "64Mi".',
      }),
      phase: 'Failed',
      reason: 'Error',
      exitCode: 137,
    },
  ];
  for (const c of cases) {
    test(`${c.name} → ${c.phase}/${c.reason}`, () => {
      const s = computeStatus(input({ pod: c.pod, output: OUTPUT, now: at(4) }));
      assert.equal(s.phase, c.phase);
      assert.equal(s.reason, c.reason);
      assert.equal(s.exitCode, c.exitCode);
      assert.equal(s.startTime, at(2));
      assert.equal(s.completionTime, at(3));
      assert.deepEqual(s.output, OUTPUT);
      assert.equal(s.podName, 'hello-abcde');
      assert.equal(cond(s, 'Finished')?.status, 'True');
      assert.equal(cond(s, 'Finished')?.reason, c.reason);
      assert.equal(cond(s, 'Started')?.status, 'True');
    });
  }
});

describe('computeStatus: the runner refused the job', () => {
  const failure = (msg: string) => terminated(125, JSON.stringify({ failure: msg }));

  test('a sandbox with a network (egress none, enforcement not declared): Failed, Started=False NetworkNotIsolated, the fix named', () => {
    const p = failure(
      'network interface eth0 exists although egress is none: this sandbox is not isolated from the network',
    );
    const s = computeStatus(input({ pod: p, now: at(4) }));
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'BackendError');
    assert.equal(s.exitCode, 125);
    assert.match(s.message ?? '', /network interface eth0/);
    assert.match(s.message ?? '', /networkPolicy\.enforced: true/);
    assert.match(s.message ?? '', /kubernetes\.operator\.networkPolicyEnforced/);
    assert.equal(cond(s, 'Started')?.status, 'False');
    assert.equal(cond(s, 'Started')?.reason, 'NetworkNotIsolated');
    assert.equal(cond(s, 'Stalled')?.status, 'True');
  });

  test("any other refusal: BackendError with the runner's own words", () => {
    const s = computeStatus(
      input({ pod: failure('cannot enter /workspace: No such file or directory'), now: at(4) }),
    );
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'BackendError');
    assert.equal(
      s.message,
      'the runner could not start the program: cannot enter /workspace: No such file or directory',
    );
  });
});

describe('computeStatus: before the program runs', () => {
  test('no pod yet: Pending, Started=False PodNotCreated, Admitted=True', () => {
    const s = computeStatus(input());
    assert.equal(s.phase, 'Pending');
    assert.equal(s.podName, undefined);
    assert.equal(cond(s, 'Admitted')?.status, 'True');
    assert.equal(cond(s, 'Started')?.reason, 'PodNotCreated');
    assert.equal(cond(s, 'Finished')?.status, 'False');
    for (const c of s.conditions ?? []) assert.equal(c.observedGeneration, 1);
    assert.equal(s.observedGeneration, 1);
  });

  test('pod running: Running with its start time', () => {
    const p = pod({
      phase: 'Running',
      containerStatuses: [
        {
          name: 'sandbox',
          ready: true,
          restartCount: 0,
          image: 'i',
          imageID: '',
          state: { running: { startedAt: at(2) } },
        },
      ],
    });
    const s = computeStatus(input({ pod: p }));
    assert.equal(s.phase, 'Running');
    assert.equal(s.startTime, at(2));
    assert.equal(cond(s, 'Started')?.status, 'True');
  });

  test('ErrImageNeverPull fails at once with ImageNotFound (waiting cannot fix it)', () => {
    const s = computeStatus(input({ pod: waiting('ErrImageNeverPull', 'image "x" not present') }));
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'ImageNotFound');
    assert.match(s.message ?? '', /not present/);
    assert.equal(s.completionTime, at(1));
  });

  test('ImagePullBackOff waits, then fails with ImageNotFound at the pending timeout', () => {
    const p = waiting('ImagePullBackOff', 'Back-off pulling image');
    assert.equal(computeStatus(input({ pod: p, now: at(59) })).phase, 'Pending');
    const s = computeStatus(input({ pod: p, now: at(60) }));
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'ImageNotFound');
    assert.match(s.message ?? '', /did not start within 60s/);
  });

  const blocked: [string, StatusInput['blocked']][] = [
    [
      'RuntimeClassNotFound',
      { reason: 'RuntimeClassNotFound', message: 'RuntimeClass "gvisor" does not exist', permanent: false },
    ],
    ['QuotaExceeded', { reason: 'QuotaExceeded', message: 'exceeded quota: q', permanent: false }],
  ];
  for (const [reason, b] of blocked) {
    test(`${reason}: Pending with Started=False ${reason}, Failed/${reason} at the pending timeout`, () => {
      const early = computeStatus(input({ blocked: b }));
      assert.equal(early.phase, 'Pending');
      assert.equal(cond(early, 'Started')?.reason, reason);
      const late = computeStatus(input({ blocked: b, now: at(61) }));
      assert.equal(late.phase, 'Failed');
      assert.equal(late.reason, reason);
    });
  }

  test('Unschedulable at the pending timeout', () => {
    const p = pod({
      phase: 'Pending',
      conditions: [
        {
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message: '0/1 nodes are available: Insufficient cpu.',
        },
      ],
    });
    const s = computeStatus(input({ pod: p, now: at(60) }));
    assert.equal(s.reason, 'Unschedulable');
    assert.match(s.message ?? '', /Insufficient cpu/);
  });

  test('nothing known: PendingTimeout', () => {
    const s = computeStatus(input({ pod: waiting('ContainerCreating'), now: at(120) }));
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'PendingTimeout');
  });

  test('a permanent refusal (invalid pod) fails at once with BackendError', () => {
    const s = computeStatus(
      input({ blocked: { reason: 'BackendError', message: 'Pod is invalid', permanent: true } }),
    );
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'BackendError');
  });
});

describe('computeStatus: policy, cancel, loss', () => {
  test('denied: Rejected/PolicyDenied, Admitted=False, no pod', () => {
    const s = computeStatus(
      input({ verdict: { allowed: false, message: 'denied by policy: image: not allowed' } }),
    );
    assert.equal(s.phase, 'Rejected');
    assert.equal(s.reason, 'PolicyDenied');
    assert.equal(cond(s, 'Admitted')?.status, 'False');
    assert.equal(cond(s, 'Admitted')?.reason, 'PolicyDenied');
    assert.equal(s.podName, undefined);
    assert.equal(s.exitCode, undefined);
  });

  test('cancel: Cancelled, keeping the start time; a pod that already finished wins', () => {
    const s = computeStatus(
      input({ cancel: true, current: { phase: 'Running', startTime: at(1), podName: 'hello-abcde' } }),
    );
    assert.equal(s.phase, 'Cancelled');
    assert.equal(s.reason, 'Cancelled');
    assert.equal(s.startTime, at(1));
    const done = computeStatus(input({ cancel: true, pod: terminated(0, report({})) }));
    assert.equal(done.phase, 'Succeeded');
  });

  test('a recorded pod that is gone: Failed/BackendError', () => {
    const s = computeStatus(input({ podLost: true, current: { phase: 'Running', podName: 'hello-abcde' } }));
    assert.equal(s.phase, 'Failed');
    assert.equal(s.reason, 'BackendError');
    assert.match(s.message ?? '', /deleted/);
  });

  test('a terminal status never changes, except observedGeneration', () => {
    const done = computeStatus(input({ pod: terminated(0, report({})), output: OUTPUT }));
    const again = computeStatus(input({ current: done, generation: 2, cancel: true, now: at(500) }));
    assert.deepEqual(again, { ...done, observedGeneration: 2 });
  });

  test('transition times: kept while a condition holds, moved when it flips', () => {
    const p1 = computeStatus(input({ now: at(1) }));
    const p2 = computeStatus(input({ current: p1, pod: waiting('ContainerCreating'), now: at(2) }));
    assert.equal(cond(p2, 'Started')?.lastTransitionTime, at(1));
    const done = computeStatus(input({ current: p2, pod: terminated(0, report({})), now: at(4) }));
    assert.equal(cond(done, 'Started')?.lastTransitionTime, at(4));
    assert.equal(cond(done, 'Admitted')?.lastTransitionTime, at(1));
  });

  test('no undefined fields (a status compares equal to its stored JSON)', () => {
    const s = computeStatus(input());
    assert.deepEqual(JSON.parse(JSON.stringify(s)), s);
  });
});

describe('requeueAfterMs', () => {
  const t = { createdAt: CREATED, pendingTimeoutSeconds: 60, ttlSecondsAfterFinished: 30, now: at(10) };
  test('pending: until the pending deadline', () =>
    assert.equal(requeueAfterMs({ phase: 'Pending' }, t), 50_000));
  test('finished with a TTL: until it expires (0 when due)', () => {
    assert.equal(requeueAfterMs({ phase: 'Succeeded', completionTime: at(5) }, t), 25_000);
    assert.equal(requeueAfterMs({ phase: 'Failed', completionTime: at(-60) }, t), 0);
  });
  test('the TTL counts from when the end was recorded, not from the program’s end', () => {
    // The program ended at 3 s, while the apiserver was away; the operator recorded it at 60 s.
    const recorded = computeStatus(input({ pod: terminated(0, report({})), output: OUTPUT, now: at(60) }));
    assert.equal(recorded.completionTime, at(3), 'completionTime stays the program’s end');
    assert.equal(finishRecordedAt(recorded), at(60));
    assert.equal(requeueAfterMs(recorded, { ...t, now: at(60) }), 30_000, 'not 0: deleted as it is written');
    assert.equal(requeueAfterMs(recorded, { ...t, now: at(90) }), 0);
    // A status written without the condition: its completionTime.
    assert.equal(finishRecordedAt({ phase: 'Succeeded', completionTime: at(5) }), at(5));
  });
  test('running, or finished without a TTL: nothing to wait for', () => {
    assert.equal(requeueAfterMs({ phase: 'Running' }, t), undefined);
    assert.equal(
      requeueAfterMs(
        { phase: 'Succeeded', completionTime: at(5) },
        { ...t, ttlSecondsAfterFinished: undefined },
      ),
      undefined,
    );
  });
});

describe('computeStatus: the kstatus conditions (Ready, Stalled, Reconciling)', () => {
  const running = pod({
    phase: 'Running',
    containerStatuses: [
      {
        name: 'sandbox',
        ready: true,
        restartCount: 0,
        image: 'i',
        imageID: '',
        state: { running: { startedAt: at(2) } },
      },
    ],
  });
  const cases: [
    string,
    Partial<StatusInput>,
    string,
    { Ready: string; Stalled: string; Reconciling: string },
  ][] = [
    ['Pending (no pod yet)', {}, 'Pending', { Ready: 'False', Stalled: 'False', Reconciling: 'True' }],
    ['Running', { pod: running }, 'Running', { Ready: 'False', Stalled: 'False', Reconciling: 'True' }],
    [
      'Succeeded',
      { pod: terminated(0, report({})) },
      'Succeeded',
      { Ready: 'True', Stalled: 'False', Reconciling: 'False' },
    ],
    [
      'Failed',
      { pod: terminated(3, report({ exitCode: 3 })) },
      'Failed',
      { Ready: 'False', Stalled: 'True', Reconciling: 'False' },
    ],
    [
      'TimedOut',
      { pod: terminated(137, report({ exitCode: 137, signal: 9, timedOut: true })) },
      'TimedOut',
      { Ready: 'False', Stalled: 'True', Reconciling: 'False' },
    ],
    [
      'Rejected',
      { verdict: { allowed: false, message: 'timeoutSeconds over the ceiling' } },
      'Rejected',
      { Ready: 'False', Stalled: 'True', Reconciling: 'False' },
    ],
    ['Cancelled', { cancel: true }, 'Cancelled', { Ready: 'False', Stalled: 'True', Reconciling: 'False' }],
  ];
  for (const [name, over, phase, want] of cases) {
    test(`${name}: Ready=${want.Ready} Stalled=${want.Stalled} Reconciling=${want.Reconciling}`, () => {
      const s = computeStatus(input({ ...over, now: at(4) }));
      assert.equal(s.phase, phase);
      for (const type of ['Ready', 'Stalled', 'Reconciling'] as const) {
        const c = cond(s, type);
        assert.equal(c?.status, want[type], `${type} on ${phase}`);
        assert.equal(c?.observedGeneration, 1);
        assert.equal(c?.reason, s.reason ?? s.phase, `${type} carries the run's reason`);
      }
    });
  }

  test('a run that goes Running → Succeeded flips Reconciling and Ready, with new transition times', () => {
    const first = computeStatus(input({ pod: running, now: at(2) }));
    const done = computeStatus(input({ current: first, pod: terminated(0, report({})), now: at(5) }));
    assert.equal(cond(done, 'Reconciling')?.status, 'False');
    assert.equal(cond(done, 'Reconciling')?.lastTransitionTime, at(5));
    assert.equal(cond(done, 'Ready')?.lastTransitionTime, at(5));
    assert.equal(cond(done, 'Stalled')?.lastTransitionTime, at(2), 'Stalled stayed False');
  });
});
