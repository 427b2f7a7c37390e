// A warm run's status comes from the same computeStatus as a cold run's: the claim gives Running
// with served warm and the pool, and the exit trailer's end, read as a finished pod, gives the
// terminal status (exit code, timeout, the runner's failure) and keeps both.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { computeStatus, type StatusInput } from '../../../../src/controller/sandboxrun/compute-status.js';
import { warmEndView } from '../../../../src/controller/sandboxrun/warm-run.js';
import { servingView, type PodView } from '../../../../src/controller/pod/observe-pod.js';
import type { TrailerEnd } from '../../../../src/runner/exit-trailer.js';

const CLAIMED = '2026-01-01T00:00:10.000Z';
const POD = { name: 'py-x7k2q', uid: 'pod-uid' };

function input(over: Partial<StatusInput>): StatusInput {
  return {
    generation: 1,
    createdAt: '2026-01-01T00:00:09Z',
    current: {},
    verdict: { allowed: true },
    cancel: false,
    pendingTimeoutSeconds: 60,
    podName: POD.name,
    pod: undefined,
    blocked: undefined,
    podLost: false,
    output: undefined,
    now: CLAIMED,
    ...over,
  };
}

const running: PodView = servingView(POD, CLAIMED);

const exit = (r: Partial<{ exitCode: number; timedOut: boolean }>): TrailerEnd => ({
  kind: 'exit',
  report: {
    exitCode: 0,
    signal: 0,
    timedOut: false,
    oomKilled: false,
    stdoutBytes: 3,
    stderrBytes: 0,
    durationMs: 12,
    ...r,
  },
});

const started = computeStatus(input({ pod: running, served: { served: 'warm', pool: 'py' } }));

function ended(end: TrailerEnd) {
  const pod = warmEndView(
    POD,
    {
      state: 'done',
      end,
      output: { tail: 'hi\n', truncated: false, bytes: 3 },
      finishedAt: '2026-01-01T00:00:10.050Z',
    },
    CLAIMED,
  );
  return computeStatus(
    input({
      current: started,
      pod,
      output: { tail: 'hi\n', truncated: false, bytes: 3 },
      now: '2026-01-01T00:00:10.060Z',
    }),
  );
}

test('the claim: Running, served warm from the pool, the deadline counted from the claim', () => {
  assert.equal(started.phase, 'Running');
  assert.equal(started.served, 'warm');
  assert.equal(started.pool, 'py');
  assert.equal(started.podName, POD.name);
  assert.equal(started.startTime, CLAIMED);
});

test('the trailer’s exit: Succeeded, with the output tail, still served warm', () => {
  const s = ended(exit({}));
  assert.equal(s.phase, 'Succeeded');
  assert.equal(s.exitCode, 0);
  assert.equal(s.served, 'warm');
  assert.equal(s.pool, 'py');
  assert.equal(s.output?.tail, 'hi\n');
  assert.equal(s.completionTime, '2026-01-01T00:00:10.050Z');
});

test('a non-zero exit fails with Error; a timeout is TimedOut', () => {
  const failed = ended(exit({ exitCode: 3 }));
  assert.equal(failed.phase, 'Failed');
  assert.equal(failed.reason, 'Error');
  assert.equal(failed.exitCode, 3);
  assert.equal(ended(exit({ exitCode: 137, timedOut: true })).phase, 'TimedOut');
});

test('the runner’s failure trailer: Failed, saying why', () => {
  const s = ended({ kind: 'failure', message: 'unknown job record type 0x7a' });
  assert.equal(s.phase, 'Failed');
  assert.match(s.message ?? '', /the runner could not start the program: unknown job record type 0x7a/);
});
