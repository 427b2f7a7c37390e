import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffDelay } from '../../../src/shared/backoff.js';

test('doubles from the initial delay and stops at the maximum', () => {
  const o = { initialMs: 250, maxMs: 2000 };
  assert.deepEqual(
    [1, 2, 3, 4, 5, 10].map((n) => backoffDelay(n, o)),
    [250, 500, 1000, 2000, 2000, 2000],
  );
  assert.equal(backoffDelay(0, o), 250, 'attempt 0 counts as the first');
});

test('with jitter, a delay between half and all of the step', () => {
  const o = { initialMs: 1000, maxMs: 8000, jitter: true };
  assert.equal(
    backoffDelay(2, o, () => 0),
    1000,
  );
  assert.equal(
    backoffDelay(2, o, () => 1),
    2000,
  );
  assert.equal(
    backoffDelay(9, o, () => 0.5),
    6000,
  );
});
