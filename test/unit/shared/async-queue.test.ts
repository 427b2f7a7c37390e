import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { AsyncQueue } from '../../../src/shared/async-queue.js';

async function drain<T>(q: AsyncQueue<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of q) out.push(item);
  return out;
}

test('items pushed before iteration come out in order, then end finishes', async () => {
  const q = new AsyncQueue<number>();
  q.push(1);
  q.push(2);
  q.push(3);
  q.end();
  assert.deepEqual(await drain(q), [1, 2, 3]);
});

test('a waiting consumer gets items pushed later, in order', async () => {
  const q = new AsyncQueue<string>();
  const done = drain(q);
  await tick();
  q.push('a');
  await tick();
  q.push('b');
  q.push('c');
  await tick();
  q.end();
  assert.deepEqual(await done, ['a', 'b', 'c']);
});

test('falsy items (0, empty string, false) are not mistaken for the end', async () => {
  const q = new AsyncQueue<number | string | boolean>();
  q.push(0);
  q.push('');
  q.push(false);
  q.end();
  assert.deepEqual(await drain(q), [0, '', false]);
});

test('end wakes a waiting consumer', async () => {
  const q = new AsyncQueue<number>();
  const it = q[Symbol.asyncIterator]();
  const next = it.next();
  q.end();
  assert.deepEqual(await next, { value: undefined, done: true });
});

test('pushes after end are dropped; items queued before end still come out', async () => {
  const q = new AsyncQueue<number>();
  q.push(1);
  q.end();
  q.push(2);
  assert.deepEqual(await drain(q), [1]);
});

test('an iterator keeps answering done after the end', async () => {
  const q = new AsyncQueue<number>();
  q.end();
  const it = q[Symbol.asyncIterator]();
  assert.equal((await it.next()).done, true);
  assert.equal((await it.next()).done, true);
});

test('breaking out of the loop discards the rest', async () => {
  const q = new AsyncQueue<number>();
  for (let i = 0; i < 5; i++) q.push(i);
  const seen: number[] = [];
  for await (const n of q) {
    seen.push(n);
    if (n === 1) break;
  }
  assert.deepEqual(seen, [0, 1]);
  q.end();
  assert.deepEqual(await drain(q), []);
});
