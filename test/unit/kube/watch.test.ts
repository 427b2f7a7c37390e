// The one watch loop's decisions, with a scripted stream in place of the apiserver's watch (the
// real one is exercised by the kube tier, apiserver restarts and forced 410s included).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { WatchHandlers, WatchTarget } from '../../../src/kube/client.js';
import { KubeApiError } from '../../../src/kube/errors.js';
import type { KubeObject } from '../../../src/kube/objects.js';
import { failuresAfter, watchLoop, type WatchRestart } from '../../../src/kube/watch.js';

type Step = (h: WatchHandlers<KubeObject>) => void;

const obj = (name: string, rv: string): KubeObject => ({
  metadata: { name, namespace: 'ns', resourceVersion: rv },
});
const err = (status: number): KubeApiError =>
  new KubeApiError(`HTTP ${status}`, { code: 'BACKEND_ERROR', status, reason: '' });

/** A watch opener that plays one scripted step per watch and records the resourceVersion each asked for. */
function scripted(steps: Step[]) {
  const asked: (string | undefined)[] = [];
  return {
    asked,
    kube: {
      watch: <T>(
        _t: WatchTarget,
        q: { resourceVersion: string | undefined; timeoutSeconds: number },
        h: WatchHandlers<T>,
      ): Promise<AbortController> => {
        asked.push(q.resourceVersion);
        const step = steps.shift();
        // A watch past the script stays open until aborted.
        if (step) setImmediate(() => step(h as WatchHandlers<KubeObject>));
        return Promise.resolve(new AbortController());
      },
    },
  };
}

const base = { target: { path: '/api/v1/namespaces/ns/pods' }, timeoutSeconds: 60 };

describe('watchLoop', () => {
  test('events end the loop with their value; re-watches resume from the last resourceVersion', async () => {
    const s = scripted([
      (h) => {
        h.onEvent('ADDED', obj('a', '5'));
        h.onEvent('BOOKMARK', obj('', '7'));
        // The server closes the watch: the loop re-watches (after a short backoff: it ended at once).
        h.onDone(undefined);
      },
      (h) => h.onEvent('MODIFIED', obj('b', '9')),
    ]);
    const seen: string[] = [];
    const end = await watchLoop(s.kube, {
      ...base,
      resourceVersion: '1',
      resync: () => Promise.reject(new Error('not called')),
      onEvent: (type, o) => {
        seen.push(`${type} ${o.metadata?.name}`);
        return o.metadata?.name === 'b' ? { end: 'done' } : undefined;
      },
      signal: new AbortController().signal,
    });
    assert.equal(end, 'done');
    assert.deepEqual(seen, ['ADDED a', 'MODIFIED b']);
    assert.deepEqual(s.asked, ['1', '7']);
  });

  test('410 Gone (in-stream or HTTP) resyncs and watches from the version it read', async () => {
    const s = scripted([(h) => h.onDone(err(410)), (h) => h.onEvent('ADDED', obj('x', '30'))]);
    let resyncs = 0;
    const restarts: WatchRestart[] = [];
    const end = await watchLoop(s.kube, {
      ...base,
      resourceVersion: '1',
      resync: () => Promise.resolve(String(20 + resyncs++)),
      onEvent: () => ({ end: 'seen' }),
      signal: new AbortController().signal,
      onRestart: (r) => restarts.push(r),
    });
    assert.equal(end, 'seen');
    assert.equal(resyncs, 1);
    assert.deepEqual(s.asked, ['1', '20']);
    assert.equal(restarts[0]?.reason, 'expired');
  });

  test('a resync can end the loop (the object is gone)', async () => {
    const s = scripted([]);
    const end = await watchLoop(s.kube, {
      ...base,
      resync: () => Promise.resolve({ end: 'deleted' }),
      onEvent: () => undefined,
      signal: new AbortController().signal,
    });
    assert.equal(end, 'deleted');
    assert.deepEqual(s.asked, []);
  });

  test('a failure is retried after the backoff; a fatal one rejects', async () => {
    const retried = scripted([(h) => h.onDone(err(500)), (h) => h.onEvent('ADDED', obj('x', '2'))]);
    const restarts: WatchRestart[] = [];
    assert.equal(
      await watchLoop(retried.kube, {
        ...base,
        resourceVersion: '1',
        resync: () => Promise.resolve('1'),
        onEvent: () => ({ end: 'seen' }),
        signal: new AbortController().signal,
        onRestart: (r) => restarts.push(r),
      }),
      'seen',
    );
    assert.deepEqual(
      restarts.map((r) => [r.reason, r.failures, r.err?.status]),
      [['error', 1, 500]],
    );

    const refused = scripted([(h) => h.onDone(err(403))]);
    await assert.rejects(
      watchLoop(refused.kube, {
        ...base,
        resourceVersion: '1',
        resync: () => Promise.resolve('1'),
        onEvent: () => undefined,
        signal: new AbortController().signal,
        isFatal: (e) => e.status === 403,
      }),
      (e: unknown) => e instanceof KubeApiError && e.status === 403,
    );
  });

  test('aborting the signal ends an open watch: undefined', async () => {
    const s = scripted([]);
    const stop = new AbortController();
    const loop = watchLoop(s.kube, {
      ...base,
      resourceVersion: '1',
      resync: () => Promise.resolve('1'),
      onEvent: () => undefined,
      signal: stop.signal,
    });
    setImmediate(() => stop.abort());
    assert.equal(await loop, undefined);
  });

  test('failuresAfter: an error, or a watch ended within a second, counts; a long watch resets', () => {
    assert.equal(failuresAfter(0, 'error', 60_000), 1);
    assert.equal(failuresAfter(2, 'error', 10), 3);
    assert.equal(failuresAfter(0, 'closed', 50), 1);
    assert.equal(failuresAfter(3, 'closed', 60_000), 0);
    assert.equal(failuresAfter(1, 'expired', 5_000), 0);
    assert.equal(failuresAfter(1, 'stalled', 120_000), 0);
  });
});
