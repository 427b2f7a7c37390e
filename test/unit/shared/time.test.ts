import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pollUntil, within, withTimeout } from '../../../src/shared/time.js';

const later = <T>(ms: number, value: T): Promise<T> => new Promise((r) => setTimeout(() => r(value), ms));

test('within: the value when it comes first, undefined when the time runs out', async () => {
  assert.equal(await within(later(1, 'v'), 5000), 'v');
  assert.equal(await within(later(5000, 'v'), 10), undefined);
});

test('withTimeout: the value, or a rejection naming what did not happen', async () => {
  assert.equal(await withTimeout(later(1, 7), 5000, 'slow'), 7);
  await assert.rejects(withTimeout(later(5000, 7), 10, 'the pool did not fill'), /the pool did not fill/);
  await assert.rejects(withTimeout(Promise.reject(new Error('own')), 5000, 'slow'), /own/);
});

test('pollUntil: true once the check holds, false when the time runs out', async () => {
  let n = 0;
  assert.equal(await pollUntil(() => ++n >= 3, { intervalMs: 1, timeoutMs: 5000 }), true);
  assert.equal(n, 3);
  assert.equal(await pollUntil(() => Promise.resolve(false), { intervalMs: 1, timeoutMs: 20 }), false);
});
