import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { Slots } from '../../../src/gateway/slots.js';

/** A principal whose id is its name (ids are keys here; names only appear in messages). */
const who = (name: string, maxConcurrentRuns?: number) => ({
  id: `id-of-${name}`,
  name,
  ...(maxConcurrentRuns !== undefined ? { maxConcurrentRuns } : {}),
});
import { AppError } from '../../../src/shared/errors.js';

const isBusy = (e: unknown): boolean => e instanceof AppError && e.code === 'BUSY' && e.retryable;
const isCancelled = (e: unknown): boolean => e instanceof AppError && e.code === 'CANCELLED';

/** Aborts, after each test, the callers a test leaves queued (so no 30 s wait timer outlives it). */
let leftover = new AbortController();
beforeEach(() => {
  leftover = new AbortController();
});
afterEach(() => leftover.abort());

/** Tracks whether a promise has settled, and how. */
function track<T>(p: Promise<T>): {
  settled: () => boolean;
  value: () => T | undefined;
  error: () => unknown;
} {
  let settled = false;
  let value: T | undefined;
  let error: unknown;
  p.then(
    (v) => {
      settled = true;
      value = v;
    },
    (e: unknown) => {
      settled = true;
      error = e;
    },
  );
  return { settled: () => settled, value: () => value, error: () => error };
}

describe('global cap and bounded queue', () => {
  test('runs up to maxConcurrent at once', async () => {
    const a = new Slots({ maxConcurrent: 2, maxQueued: 0 });
    await a.acquire(who('p'));
    await a.acquire(who('q'));
    assert.deepEqual(a.stats, { running: 2, queued: 0 });
  });

  test('past the cap, callers queue up to maxQueued; beyond that, BUSY at once', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 2 });
    await a.acquire(who('p'));
    const w1 = track(a.acquire(who('p'), leftover.signal));
    const w2 = track(a.acquire(who('p'), leftover.signal));
    await tick();
    assert.deepEqual(a.stats, { running: 1, queued: 2 });
    assert.equal(w1.settled(), false);
    await assert.rejects(a.acquire(who('p')), (e: unknown) => {
      assert.ok(isBusy(e));
      assert.match(
        (e as AppError).message,
        /^busy, retry later: 1 runs in progress and 2 queued, the server's limit$/,
      );
      assert.match((e as AppError).hint ?? '', /send the request again/);
      return true;
    });
    assert.deepEqual(a.stats, { running: 1, queued: 2 });
    assert.equal(w2.settled(), false);
  });

  test('maxQueued 0: BUSY as soon as every slot is taken', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 0 });
    await a.acquire(who('p'));
    await assert.rejects(a.acquire(who('q')), isBusy);
  });

  test('release hands the slot to the next waiter, first come first served', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 5 });
    const release0 = await a.acquire(who('p'));
    const order: number[] = [];
    const waiters = [1, 2, 3].map((i) =>
      a.acquire(who('p')).then((release) => {
        order.push(i);
        return release;
      }),
    );
    await tick();
    assert.deepEqual(a.stats, { running: 1, queued: 3 });
    release0();
    const release1 = await waiters[0]!;
    assert.deepEqual(a.stats, { running: 1, queued: 2 });
    release1();
    const release2 = await waiters[1]!;
    release2();
    const release3 = await waiters[2]!;
    assert.deepEqual(order, [1, 2, 3]);
    assert.deepEqual(a.stats, { running: 1, queued: 0 });
    release3();
    assert.deepEqual(a.stats, { running: 0, queued: 0 });
  });

  test('releasing twice gives back one slot only', async () => {
    const a = new Slots({ maxConcurrent: 2, maxQueued: 0 });
    const r1 = await a.acquire(who('p'));
    await a.acquire(who('p'));
    r1();
    r1();
    assert.deepEqual(a.stats, { running: 1, queued: 0 });
    await a.acquire(who('p'));
    await assert.rejects(a.acquire(who('p')), isBusy);
  });

  test('a double release does not hand out a second queued slot', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 2 });
    const r0 = await a.acquire(who('p'));
    const w1 = track(a.acquire(who('p'), leftover.signal));
    const w2 = track(a.acquire(who('p'), leftover.signal));
    r0();
    r0();
    await tick();
    assert.equal(w1.settled(), true);
    assert.equal(w2.settled(), false);
    assert.deepEqual(a.stats, { running: 1, queued: 1 });
  });
});

describe('per-principal cap', () => {
  test('a principal at its limit gets BUSY even with free slots; others are not affected', async () => {
    const a = new Slots({ maxConcurrent: 10, maxQueued: 10 });
    const r = await a.acquire(who('alice', 1));
    await assert.rejects(a.acquire(who('alice', 1)), (e: unknown) => {
      assert.ok(isBusy(e));
      assert.match((e as AppError).message, /"alice" already has 1 runs in progress, its limit/);
      return true;
    });
    await a.acquire(who('bob', 1));
    r();
    await a.acquire(who('alice', 1));
  });

  test('no principal limit: only the global cap applies', async () => {
    const a = new Slots({ maxConcurrent: 3, maxQueued: 0 });
    for (let i = 0; i < 3; i++) await a.acquire(who('alice'));
    await assert.rejects(a.acquire(who('alice')), /the server's limit/);
  });

  test('queued runs count against the principal', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 10 });
    await a.acquire(who('other'));
    track(a.acquire(who('alice', 2), leftover.signal));
    track(a.acquire(who('alice', 2), leftover.signal));
    await tick();
    await assert.rejects(a.acquire(who('alice', 2)), /"alice" already has 2 runs/);
  });

  test('the principal check comes before the queue check', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 0 });
    await a.acquire(who('alice', 1));
    await assert.rejects(a.acquire(who('alice', 1)), /"alice" already has 1/);
  });
});

describe('abort and timeouts while queued', () => {
  test('aborting a queued caller rejects it with CANCELLED and frees its queue place and principal count', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 1 });
    const r0 = await a.acquire(who('other'));
    const c = new AbortController();
    const w = a.acquire(who('alice', 1), c.signal);
    await tick();
    assert.deepEqual(a.stats, { running: 1, queued: 1 });
    c.abort();
    await assert.rejects(w, isCancelled);
    assert.deepEqual(a.stats, { running: 1, queued: 0 });
    // the queue place is free again, and alice may queue again
    const w2 = track(a.acquire(who('alice', 1), leftover.signal));
    await tick();
    assert.equal(w2.settled(), false);
    r0();
    await tick();
    assert.equal(typeof w2.value(), 'function');
  });

  test('an AppError abort reason is what the caller gets', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 1 });
    await a.acquire(who('p'));
    const c = new AbortController();
    const w = a.acquire(who('p'), c.signal);
    const reason = new AppError('ENGINE_UNAVAILABLE', 'shutting down');
    c.abort(reason);
    await assert.rejects(w, (e) => e === reason);
  });

  test('an aborted waiter is skipped: release goes to the next one', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 2 });
    const r0 = await a.acquire(who('p'));
    const c = new AbortController();
    const w1 = a.acquire(who('p'), c.signal);
    const w2 = track(a.acquire(who('p')));
    c.abort();
    await assert.rejects(w1, isCancelled);
    r0();
    await tick();
    assert.equal(typeof w2.value(), 'function');
    assert.deepEqual(a.stats, { running: 1, queued: 0 });
  });

  test('aborting after the slot was granted changes nothing', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 1 });
    const r0 = await a.acquire(who('p'));
    const c = new AbortController();
    const w = a.acquire(who('p'), c.signal);
    r0();
    const r1 = await w;
    c.abort();
    assert.deepEqual(a.stats, { running: 1, queued: 0 });
    r1();
    assert.deepEqual(a.stats, { running: 0, queued: 0 });
  });

  test('an already-aborted signal is refused at once, with or without a free slot, and holds nothing', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 1, maxWaitMs: 60_000 });
    await assert.rejects(a.acquire(who('alice', 1), AbortSignal.abort()), isCancelled);
    assert.deepEqual(a.stats, { running: 0, queued: 0 });
    await a.acquire(who('other'));
    const t0 = performance.now();
    await assert.rejects(a.acquire(who('alice', 1), AbortSignal.abort()), isCancelled);
    assert.ok(performance.now() - t0 < 1000);
    assert.deepEqual(a.stats, { running: 1, queued: 0 });
    // alice's count was given back
    track(a.acquire(who('alice', 1), leftover.signal));
    await tick();
    assert.deepEqual(a.stats, { running: 1, queued: 1 });
  });

  test('maxWaitMs: a caller that waits too long gets BUSY and leaves the queue', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 1, maxWaitMs: 30 });
    await a.acquire(who('p'));
    const t0 = performance.now();
    await assert.rejects(a.acquire(who('alice', 1)), (e: unknown) => {
      assert.ok(isBusy(e));
      assert.match((e as AppError).message, /no slot came free within 30 ms/);
      return true;
    });
    assert.ok(performance.now() - t0 >= 25);
    assert.deepEqual(a.stats, { running: 1, queued: 0 });
    // alice's count was given back
    track(a.acquire(who('alice', 1)));
    await tick();
    assert.deepEqual(a.stats, { running: 1, queued: 1 });
  });

  test('a waiter granted in time is not timed out later', async () => {
    const a = new Slots({ maxConcurrent: 1, maxQueued: 1, maxWaitMs: 40 });
    const r0 = await a.acquire(who('p'));
    const w = track(a.acquire(who('p')));
    setTimeout(r0, 5);
    await new Promise((r) => setTimeout(r, 80));
    assert.equal(typeof w.value(), 'function');
    assert.equal(w.error(), undefined);
    assert.deepEqual(a.stats, { running: 1, queued: 0 });
  });
});

test('many callers: never more than maxConcurrent at once, and everyone runs', async () => {
  const a = new Slots({ maxConcurrent: 3, maxQueued: 100 });
  let active = 0;
  let peak = 0;
  const work = async (i: number): Promise<number> => {
    const release = await a.acquire(who(`p${i % 4}`));
    active++;
    peak = Math.max(peak, active);
    await new Promise((r) => setTimeout(r, 1 + (i % 3)));
    active--;
    release();
    return i;
  };
  const done = await Promise.all(Array.from({ length: 40 }, (_, i) => work(i)));
  assert.equal(done.length, 40);
  assert.equal(peak, 3);
  assert.deepEqual(a.stats, { running: 0, queued: 0 });
});
