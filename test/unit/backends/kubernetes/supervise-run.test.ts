// superviseRun() over a stand-in for the apiserver calls: a release stops following a SandboxRun
// and leaves it running (spec.cancel is never set, not even when a deadline passes afterwards), an
// abort cancels it, and a run served again on another pod takes that pod's log alone.
import assert from 'node:assert/strict';
import type { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import type { SandboxRun } from '../../../../src/api/v1alpha1/sandboxrun.js';
import type { FollowEnd, Following } from '../../../../src/backends/kubernetes/follow-object.js';
import type { RunApi } from '../../../../src/backends/kubernetes/run-api.js';
import { superviseRun, type SuperviseInput } from '../../../../src/backends/kubernetes/supervise-run.js';
import { outputWindow } from '../../../../src/runner/protocol.js';
import { AppError } from '../../../../src/shared/errors.js';

const RUNNING = {
  metadata: { name: 'run-1', namespace: 'ns', resourceVersion: '5' },
  status: { phase: 'Running' },
} as unknown as SandboxRun;

/**
 * A run that stays Running (no pod to read a log of); counts the cancels asked of it. Its watch
 * closes `closeMs` after the follower's signal aborts.
 */
function runThatStays(closeMs = 0): { api: RunApi; cancels: () => number; followed: Promise<AbortSignal> } {
  let cancels = 0;
  let seen!: (signal: AbortSignal) => void;
  const followed = new Promise<AbortSignal>((r) => (seen = r));
  const api = {
    followRun: (_ref: unknown, f: Following<SandboxRun>) => {
      f.onObject(RUNNING);
      seen(f.signal);
      return new Promise<FollowEnd>((resolve) =>
        f.signal.addEventListener('abort', () => setTimeout(() => resolve('aborted'), closeMs)),
      );
    },
    cancelRun: () => {
      cancels++;
      return Promise.resolve();
    },
  } as unknown as RunApi;
  return { api, cancels: () => cancels, followed };
}

function input(api: RunApi, over: Partial<SuperviseInput> = {}): SuperviseInput {
  return {
    api,
    namespace: 'ns',
    name: 'run-1',
    resourceVersion: '5',
    window: outputWindow(65_536),
    timing: {
      watchTimeoutSeconds: 60,
      pickupTimeoutMs: 600_000,
      deadlineMs: 600_000,
      cancelWaitMs: 20,
      logGraceMs: 20,
    },
    onChunk: () => undefined,
    ...over,
  };
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const tick = () => new Promise<void>((r) => setImmediate(r));

describe('superviseRun: release and cancel', () => {
  test('a release ends the follow and rejects ENGINE_UNAVAILABLE; nothing is cancelled', async () => {
    const { api, cancels, followed } = runThatStays(50);
    const release = new AbortController();
    // The deadline passes while the watch closes: a released run is not failed (and cancelled) by it.
    const supervised = superviseRun(
      input(api, { release: release.signal, timing: { ...input(api).timing, deadlineMs: 30 } }),
    );
    const follow = await followed;
    release.abort();
    await assert.rejects(supervised, (e: unknown) => {
      assert.ok(e instanceof AppError);
      assert.equal(e.code, 'ENGINE_UNAVAILABLE');
      assert.match(e.message, /ns\/run-1.*left it running/);
      return true;
    });
    assert.equal(follow.aborted, true, 'the watch is closed');
    await pause(60);
    assert.equal(cancels(), 0, 'spec.cancel is not set');
  });

  test('an abort sets spec.cancel and ends the run Cancelled', async () => {
    const { api, cancels, followed } = runThatStays();
    const cancel = new AbortController();
    const supervised = superviseRun(input(api, { signal: cancel.signal }));
    await followed;
    cancel.abort();
    const done = await supervised;
    assert.equal(done.status.phase, 'Cancelled');
    assert.equal(cancels(), 1);
  });

  test('a run that failed before its release is still cancelled', async () => {
    const { api, cancels, followed } = runThatStays();
    const release = new AbortController();
    const supervised = superviseRun(
      input(api, { release: release.signal, timing: { ...input(api).timing, deadlineMs: 10 } }),
    );
    const failed = assert.rejects(
      supervised,
      (e: unknown) => e instanceof AppError && e.code === 'BACKEND_ERROR',
    );
    await followed;
    await pause(30);
    release.abort();
    await failed;
    assert.equal(cancels(), 1);
  });
});

// The operator claimed pool pod A, the job never reached it (its runner said so in its log and
// ended), so the operator served the run again on pool pod B: the run's output is B's log alone.
test("a run served again on another pod: the output is the second pod's log, not the first's", async () => {
  const logs: Record<string, string> = {
    'pod-a': 'sandpit-runner: no job arrived: stdin ended first\n',
    'pod-b': 'burst 80\n',
  };
  const followed: string[] = [];
  const run = (status: Record<string, unknown>) => ({ status }) as unknown as SandboxRun;
  const api = {
    followRun: async (_ref: unknown, following: { onObject: (o: SandboxRun) => boolean }) => {
      const startTime = '2026-12-03T09:00:00Z';
      for (const status of [
        { phase: 'Running', podName: 'pod-a', served: 'warm', pool: 'p', startTime },
        { phase: 'Pending', message: 'serving the run again: its job never reached its pod' },
        { phase: 'Running', podName: 'pod-b', served: 'warm', pool: 'p', startTime },
        { phase: 'Succeeded', reason: 'Completed', exitCode: 0, podName: 'pod-b', served: 'warm', startTime },
      ]) {
        following.onObject(run(status));
        await tick();
        await tick();
      }
      return 'seen' as const;
    },
    streamLog: (pod: { name: string }, sink: Writable): Promise<AbortController> => {
      followed.push(pod.name);
      sink.end(Buffer.from(logs[pod.name] ?? ''));
      return Promise.resolve(new AbortController());
    },
    cancelRun: () => Promise.resolve(),
  } as unknown as RunApi;

  const done = await superviseRun(input(api));
  assert.deepEqual(followed, ['pod-a', 'pod-b']);
  assert.equal(done.status.phase, 'Succeeded');
  assert.equal(done.output.text, 'burst 80\n');
});
