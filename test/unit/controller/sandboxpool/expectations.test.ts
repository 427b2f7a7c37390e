import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from '../../../../src/kube/objects.js';
import { EXPECTATION_TTL_MS, PoolExpectations } from '../../../../src/controller/sandboxpool/expectations.js';

const pod = (name: string, extra: Record<string, unknown> = {}): Pod => ({
  metadata: { name, uid: `uid-${name}`, ...extra },
});
const names = (pods: Pod[]) => pods.map((p) => p.metadata?.name).sort();

describe('PoolExpectations', () => {
  test('a created pod counts until the cache shows it, then the cache is used', () => {
    const e = new PoolExpectations();
    e.created('ns/p', pod('a'), 0);
    assert.deepEqual(names(e.apply('ns/p', [], 10)), ['a']);
    assert.deepEqual(names(e.apply('ns/p', [], 20)), ['a'], 'still not in the cache: still counted');
    const cached = pod('a', { resourceVersion: '7' });
    const seen = e.apply('ns/p', [cached], 30);
    assert.deepEqual(seen, [cached]);
    assert.deepEqual(e.apply('ns/p', [], 40), [], 'met: the cache decides from now on');
  });

  test('a deleted pod stops counting at once, while the cache still shows it', () => {
    const e = new PoolExpectations();
    e.deleted('ns/p', 'uid-a', 0);
    assert.deepEqual(names(e.apply('ns/p', [pod('a'), pod('b')], 10)), ['b']);
    assert.deepEqual(names(e.apply('ns/p', [pod('b')], 20)), ['b']);
    assert.deepEqual(
      names(e.apply('ns/p', [pod('a'), pod('b')], 30)),
      ['a', 'b'],
      'met once: a new sighting counts',
    );
  });

  test('expectations end after their TTL, and are per pool', () => {
    const e = new PoolExpectations();
    e.created('ns/p', pod('a'), 0);
    assert.deepEqual(e.apply('ns/q', [], 10), []);
    assert.deepEqual(e.apply('ns/p', [], EXPECTATION_TTL_MS + 1), []);
    e.created('ns/p', pod('b'), 0);
    e.forget('ns/p');
    assert.deepEqual(e.apply('ns/p', [], 1), []);
  });
});
