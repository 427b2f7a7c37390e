// followObject() over a scripted watch: a 410 Gone reads the object afresh and watches on from
// the version read, and the follower is told why its watch was re-opened (the gateway logs it);
// a refusal that passes (a restarted apiserver's, before its RBAC caches are filled) is waited
// out, and one that lasts is thrown, mapped.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { followObject, type FollowOptions } from '../../../../src/backends/kubernetes/follow-object.js';
import type { WatchHandlers, WatchTarget } from '../../../../src/kube/client.js';
import { KubeApiError } from '../../../../src/kube/errors.js';
import type { KubeObject } from '../../../../src/kube/objects.js';
import type { WatchRestart } from '../../../../src/kube/watch.js';
import { isAppError } from '../../../../src/shared/errors.js';

type Run = KubeObject & { status: { phase: string } };
type Step = (h: WatchHandlers<KubeObject>) => void;

const run = (rv: string, phase: string): Run => ({
  metadata: { name: 'run-1', namespace: 'ns', resourceVersion: rv },
  status: { phase },
});

const refused = (status: number): KubeApiError =>
  new KubeApiError(`HTTP ${status}`, { code: 'FORBIDDEN', status, reason: 'Forbidden' });

/** A watch opener that plays one scripted step per watch (the last one again when the script is out). */
function scripted(steps: Step[]) {
  const asked: (string | undefined)[] = [];
  const kube = {
    watch: <T>(
      _t: WatchTarget,
      q: { resourceVersion: string | undefined; timeoutSeconds: number },
      h: WatchHandlers<T>,
    ): Promise<AbortController> => {
      asked.push(q.resourceVersion);
      const step = steps.length > 1 ? steps.shift()! : steps[0]!;
      setImmediate(() => step(h as WatchHandlers<KubeObject>));
      return Promise.resolve(new AbortController());
    },
  };
  return { kube, asked };
}

function following(over: Partial<FollowOptions<Run>> = {}) {
  const restarts: WatchRestart[] = [];
  const phases: string[] = [];
  let reads = 0;
  const options: FollowOptions<Run> = {
    path: '/apis/sandpit.dev/v1alpha1/namespaces/ns/sandboxruns',
    name: 'run-1',
    get: () => {
      reads++;
      return Promise.resolve(run('20', 'Running'));
    },
    context: { verb: 'watch', resource: 'sandboxruns', namespace: 'ns', server: 'https://127.0.0.1:6443' },
    resourceVersion: '10',
    onObject: (o) => {
      phases.push(o.status.phase);
      return o.status.phase === 'Succeeded';
    },
    watchTimeoutSeconds: 60,
    signal: new AbortController().signal,
    onRestart: (r) => restarts.push(r),
    ...over,
  };
  return { options, restarts, phases, reads: () => reads };
}

describe('followObject', () => {
  test('a 410 Gone reads the object afresh, watches on from its version, and is reported as expired', async () => {
    const s = scripted([
      (h) =>
        h.onDone(
          new KubeApiError('too old resource version', {
            code: 'BACKEND_ERROR',
            status: 410,
            reason: 'Expired',
          }),
        ),
      (h) => h.onEvent('MODIFIED', run('30', 'Succeeded')),
    ]);
    const f = following();
    assert.equal(await followObject(s.kube, f.options), 'seen');
    assert.equal(f.reads(), 1, 'the object was read once, after the 410');
    assert.deepEqual(s.asked, ['10', '20'], 'the second watch starts at the version read');
    assert.deepEqual(f.phases, ['Running', 'Succeeded']);
    assert.deepEqual(
      f.restarts.map((r) => r.reason),
      ['expired'],
    );
  });

  test('a refusal that passes (a restarted apiserver’s 403) is retried: the follow goes on', async () => {
    const s = scripted([(h) => h.onDone(refused(403)), (h) => h.onEvent('MODIFIED', run('30', 'Succeeded'))]);
    const f = following();
    assert.equal(await followObject(s.kube, f.options), 'seen');
    assert.deepEqual(s.asked, ['10', '10'], 'watched again from the same version');
    assert.deepEqual(
      f.restarts.map((r) => r.reason),
      ['error'],
    );
  });

  test('refusals that last past the grace are thrown, mapped to FORBIDDEN', async () => {
    const s = scripted([(h) => h.onDone(refused(403))]);
    const f = following({ refusalGraceMs: 100 });
    await assert.rejects(followObject(s.kube, f.options), (e: unknown) => {
      assert.ok(isAppError(e));
      assert.equal(e.code, 'FORBIDDEN', e.message);
      return true;
    });
    assert.ok(s.asked.length >= 2, 'retried before it was thrown');
  });
});
