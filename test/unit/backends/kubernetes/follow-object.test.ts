// followObject() over a scripted watch: a 410 Gone reads the object afresh and watches on from
// the version read, and the follower is told why its watch was re-opened (the gateway logs it).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { followObject } from '../../../../src/backends/kubernetes/follow-object.js';
import type { WatchHandlers, WatchTarget } from '../../../../src/kube/client.js';
import { KubeApiError } from '../../../../src/kube/errors.js';
import type { KubeObject } from '../../../../src/kube/objects.js';
import type { WatchRestart } from '../../../../src/kube/watch.js';

const run = (rv: string, phase: string): KubeObject & { status: { phase: string } } => ({
  metadata: { name: 'run-1', namespace: 'ns', resourceVersion: rv },
  status: { phase },
});

test('a 410 Gone reads the object afresh, watches on from its version, and is reported as expired', async () => {
  const asked: (string | undefined)[] = [];
  const steps: ((h: WatchHandlers<KubeObject>) => void)[] = [
    (h) => h.onDone(new KubeApiError('too old resource version', { code: 'BACKEND_ERROR', status: 410, reason: 'Expired' })),
    (h) => h.onEvent('MODIFIED', run('30', 'Succeeded')),
  ];
  const kube = {
    watch: <T>(
      _t: WatchTarget,
      q: { resourceVersion: string | undefined; timeoutSeconds: number },
      h: WatchHandlers<T>,
    ): Promise<AbortController> => {
      asked.push(q.resourceVersion);
      const step = steps.shift();
      if (step) setImmediate(() => step(h as WatchHandlers<KubeObject>));
      return Promise.resolve(new AbortController());
    },
  };
  const restarts: WatchRestart[] = [];
  const phases: string[] = [];
  let reads = 0;
  const end = await followObject(kube, {
    path: '/apis/sandpit.dev/v1alpha1/namespaces/ns/sandboxruns',
    name: 'run-1',
    get: () => {
      reads++;
      return Promise.resolve(run('20', 'Running'));
    },
    context: { verb: 'watch', resource: 'sandboxruns', namespace: 'ns', server: 'https://127.0.0.1:6443' },
    resourceVersion: '10',
    onObject: (o) => {
      const phase = (o as ReturnType<typeof run>).status.phase;
      phases.push(phase);
      return phase === 'Succeeded';
    },
    watchTimeoutSeconds: 60,
    signal: new AbortController().signal,
    onRestart: (r) => restarts.push(r),
  });
  assert.equal(end, 'seen');
  assert.equal(reads, 1, 'the object was read once, after the 410');
  assert.deepEqual(asked, ['10', '20'], 'the second watch starts at the version read');
  assert.deepEqual(phases, ['Running', 'Succeeded']);
  assert.deepEqual(
    restarts.map((r) => r.reason),
    ['expired'],
  );
});
