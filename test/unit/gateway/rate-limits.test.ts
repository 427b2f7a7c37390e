/**
 * Per-principal rate limits: runs a minute and output bytes a minute over a sliding 60 s window,
 * each principal on its own; a refusal is BUSY with the seconds until the run would be allowed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Principal } from '../../../src/gateway/principal.js';
import { RateLimits } from '../../../src/gateway/rate-limits.js';
import { isAppError, type AppError } from '../../../src/shared/errors.js';

const ALICE: Principal = { id: 'token:a', name: 'alice', scope: {} };
const BOB: Principal = { id: 'token:b', name: 'bob', scope: {} };

function clock(start = 1_000_000) {
  const c = { now: start, tick: (ms: number) => (c.now += ms) };
  return c;
}

function refusal(f: () => void): AppError {
  try {
    f();
  } catch (e) {
    assert.ok(isAppError(e), String(e));
    return e;
  }
  assert.fail('expected a refusal');
}

test('off by default: nothing is counted or refused', () => {
  const limits = new RateLimits();
  for (let i = 0; i < 1000; i++) limits.admit(ALICE);
  limits.output(ALICE, 1e12);
  limits.admit(ALICE);
});

test("runs a minute: the limit holds per principal, and another principal's runs are not affected", () => {
  const c = clock();
  const limits = new RateLimits({ runsPerMinute: 3, now: () => c.now });
  limits.admit(ALICE);
  c.tick(10_000);
  limits.admit(ALICE);
  limits.admit(ALICE);
  const err = refusal(() => limits.admit(ALICE));
  assert.equal(err.code, 'BUSY');
  assert.equal(err.httpStatus, 429);
  assert.match(err.message, /"alice" started 3 runs in the last minute, its limit/);
  // The oldest run leaves the window 50 s from now.
  assert.equal(err.retryAfterSeconds, 50);
  assert.equal(err.toJSON().retryAfterSeconds, 50);
  for (let i = 0; i < 3; i++) limits.admit(BOB);
  c.tick(49_000);
  assert.equal(refusal(() => limits.admit(ALICE)).retryAfterSeconds, 1);
  c.tick(1_000);
  limits.admit(ALICE);
  assert.equal(refusal(() => limits.admit(ALICE)).retryAfterSeconds, 10);
});

test("a principal's own limit wins over the server's", () => {
  const limits = new RateLimits({ runsPerMinute: 1 });
  const ci: Principal = { ...BOB, id: 'token:ci', name: 'ci', runsPerMinute: 5 };
  for (let i = 0; i < 5; i++) limits.admit(ci);
  refusal(() => limits.admit(ci));
  limits.admit(ALICE);
  refusal(() => limits.admit(ALICE));
});

test('output bytes a minute: the next run is refused once the runs of the last minute wrote the limit', () => {
  const c = clock();
  const limits = new RateLimits({ outputBytesPerMinute: 1000, now: () => c.now });
  limits.admit(ALICE);
  limits.output(ALICE, 600);
  c.tick(20_000);
  limits.admit(ALICE);
  limits.output(ALICE, 600);
  limits.admit(BOB);
  const err = refusal(() => limits.admit(ALICE));
  assert.match(err.message, /wrote 1200 bytes of output in the last minute, over its limit of 1000/);
  // Under the limit again once the first 600 bytes leave the window.
  assert.equal(err.retryAfterSeconds, 40);
  c.tick(40_000);
  limits.admit(ALICE);
});

test('a token with a bytes limit of its own is counted while the server has none', () => {
  const limits = new RateLimits();
  const capped: Principal = { ...ALICE, outputBytesPerMinute: 10 };
  limits.admit(capped);
  limits.output(capped, 10);
  refusal(() => limits.admit(capped));
});
