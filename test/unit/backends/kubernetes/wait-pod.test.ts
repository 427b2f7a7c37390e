// waitPodStopped(): the wait for a run's pod to go ends when the caller's signal aborts (a closing
// backend), long before the pod goes or the wait's own timeout passes.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FollowEnd, Following } from '../../../../src/backends/kubernetes/follow-object.js';
import type { RunApi } from '../../../../src/backends/kubernetes/run-api.js';
import { waitPodStopped } from '../../../../src/backends/kubernetes/wait-pod.js';
import type { Pod } from '../../../../src/kube/objects.js';

const RUNNING: Pod = { metadata: { name: 'p', resourceVersion: '5' }, status: { phase: 'Running' } };

/** A pod that never goes: its follow ends only when the follower's signal aborts. */
function podThatStays(): { api: RunApi; followed: Promise<AbortSignal> } {
  let seen!: (signal: AbortSignal) => void;
  const followed = new Promise<AbortSignal>((r) => (seen = r));
  const api = {
    getPod: () => Promise.resolve(RUNNING),
    followPod: (_ref: unknown, f: Following<Pod>) => {
      seen(f.signal);
      return new Promise<FollowEnd>((resolve) =>
        f.signal.addEventListener('abort', () => resolve('aborted')),
      );
    },
  } as unknown as RunApi;
  return { api, followed };
}

const OPTIONS = {
  namespace: 'ns',
  pod: 'p',
  until: 'absent',
  timeoutMs: 600_000,
  watchTimeoutSeconds: 60,
} as const;

describe('waitPodStopped', () => {
  test('ends, not seen stopped, once the signal aborts', async () => {
    const { api, followed } = podThatStays();
    const closing = new AbortController();
    const waited = waitPodStopped(api, { ...OPTIONS, signal: closing.signal });
    const signal = await followed;
    assert.equal(signal.aborted, false, 'the follow runs until then');
    closing.abort();
    assert.equal(await waited, false);
    assert.equal(signal.aborted, true);
  });
});
