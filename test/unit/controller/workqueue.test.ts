import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkQueue } from '../../../src/controller/workqueue.js';

const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('WorkQueue', () => {
  test('de-duplicates: a key waits in the queue at most once', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    q.add('a');
    assert.equal(q.length, 2);
    assert.equal(await q.get(), 'a');
    assert.equal(await q.get(), 'b');
    assert.equal(q.length, 0);
  });

  test('per-key serialised: a key added while in process comes back only after done()', async () => {
    const q = new WorkQueue();
    q.add('a');
    const key = await q.get();
    q.add('a');
    assert.equal(q.length, 0, 'not handed out again while in process');
    let second: string | undefined;
    const waiting = q.get().then((k) => (second = k));
    await tick();
    assert.equal(second, undefined);
    q.done(key!);
    await waiting;
    assert.equal(second, 'a');
  });

  test('a key added several times while in process runs once more, not several times', async () => {
    const q = new WorkQueue();
    q.add('a');
    const k = await q.get();
    q.add('a');
    q.add('a');
    q.done(k!);
    assert.equal(q.length, 1);
  });

  test('waiting workers get keys as they arrive', async () => {
    const q = new WorkQueue();
    const got = Promise.all([q.get(), q.get()]);
    q.add('x');
    q.add('y');
    assert.deepEqual((await got).sort(), ['x', 'y']);
  });

  test('exponential backoff per key, reset by forget()', () => {
    const q = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 50 });
    assert.deepEqual(
      [q.addRateLimited('a'), q.addRateLimited('a'), q.addRateLimited('a'), q.addRateLimited('a')],
      [10, 20, 40, 50],
    );
    assert.equal(q.addRateLimited('b'), 10, 'per key');
    q.forget('a');
    assert.equal(q.addRateLimited('a'), 10);
    q.shutDown();
  });

  test('addAfter: the key arrives after the delay; the earliest of several times wins', async () => {
    const q = new WorkQueue();
    q.addAfter('a', 200);
    q.addAfter('a', 20);
    q.addAfter('a', 500);
    assert.equal(q.length, 0);
    await tick(60);
    assert.equal(q.length, 1);
    assert.equal(await q.get(), 'a');
    q.shutDown();
  });

  test('shutDown wakes waiting workers with undefined and drops pending timers', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.addAfter('later', 10);
    q.shutDown();
    assert.equal(await waiting, undefined);
    assert.equal(await q.get(), undefined);
    q.add('ignored');
    assert.equal(q.length, 0);
  });
});
