// superviseRun(): a release stops following a SandboxRun and leaves it running (spec.cancel is never
// set, not even when a deadline passes afterwards), while an abort cancels it, over a stand-in for
// the apiserver calls whose run stays Running until the follower's signal aborts.
import assert from 'node:assert/strict';
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
