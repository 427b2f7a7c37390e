import assert from 'node:assert/strict';
import type { Writable } from 'node:stream';
import { test } from 'node:test';
import type { SandboxRun } from '../../../../src/api/v1alpha1/sandboxrun.js';
import type { RunApi } from '../../../../src/backends/kubernetes/run-api.js';
import { superviseRun } from '../../../../src/backends/kubernetes/supervise-run.js';
import { outputWindow } from '../../../../src/runner/protocol.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

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

  const done = await superviseRun({
    api,
    namespace: 'agents',
    name: 'r',
    resourceVersion: '1',
    window: outputWindow(4096),
    timing: {
      watchTimeoutSeconds: 60,
      pickupTimeoutMs: 60_000,
      deadlineMs: 60_000,
      cancelWaitMs: 1000,
      logGraceMs: 1000,
    },
    onChunk: () => undefined,
  });
  assert.deepEqual(followed, ['pod-a', 'pod-b']);
  assert.equal(done.status.phase, 'Succeeded');
  assert.equal(done.output.text, 'burst 80\n');
});
