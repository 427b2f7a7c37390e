import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cancelled, onAbort, sleep, throwIfAborted } from '../../../src/shared/abort.js';
import { AppError } from '../../../src/shared/errors.js';

const isCancelled = (e: unknown): boolean => e instanceof AppError && e.code === 'CANCELLED';

describe('sleep', () => {
  test('resolves after the delay', async () => {
    const t0 = performance.now();
    await sleep(30);
    assert.ok(performance.now() - t0 >= 25);
  });

  test('resolves with a signal that never aborts, and detaches from it', async () => {
    const c = new AbortController();
    await sleep(5, c.signal);
    // aborting later must not reject anything (an unhandled rejection would fail the test run)
    c.abort();
  });

  test('rejects with CANCELLED as soon as the signal aborts', async () => {
    const c = new AbortController();
    const t0 = performance.now();
    setTimeout(() => c.abort(), 10);
    await assert.rejects(sleep(10_000, c.signal), isCancelled);
    assert.ok(performance.now() - t0 < 1000);
  });

  test('rejects at once when the signal is already aborted', async () => {
    const c = new AbortController();
    c.abort();
    const t0 = performance.now();
    await assert.rejects(sleep(10_000, c.signal), isCancelled);
    assert.ok(performance.now() - t0 < 1000);
  });

  test('rejects with the AppError given as the abort reason', async () => {
    const reason = new AppError('BUSY', 'shutting down');
    await assert.rejects(sleep(10_000, AbortSignal.abort(reason)), (e) => e === reason);
  });
});

describe('cancelled', () => {
  test('a plain CANCELLED error by default', () => {
    const e = cancelled();
    assert.equal(e.code, 'CANCELLED');
    assert.equal(e.message, 'the run was cancelled');
  });

  test('an AppError reason is returned as is; any other reason becomes CANCELLED', () => {
    const reason = new AppError('ENGINE_UNAVAILABLE', 'engine went away');
    assert.equal(cancelled(AbortSignal.abort(reason)), reason);
    assert.equal(cancelled(AbortSignal.abort(new Error('x'))).code, 'CANCELLED');
    assert.equal(cancelled(AbortSignal.abort('why')).code, 'CANCELLED');
    assert.equal(cancelled(AbortSignal.abort()).code, 'CANCELLED');
  });
});

describe('throwIfAborted', () => {
  test('does nothing without a signal or before abort', () => {
    throwIfAborted();
    throwIfAborted(new AbortController().signal);
  });

  test('throws CANCELLED (or the AppError reason) after abort', () => {
    assert.throws(() => throwIfAborted(AbortSignal.abort()), isCancelled);
    const reason = new AppError('BUSY', 'b');
    assert.throws(
      () => throwIfAborted(AbortSignal.abort(reason)),
      (e) => e === reason,
    );
  });
});

describe('onAbort', () => {
  test('calls fn once when the signal aborts', () => {
    const c = new AbortController();
    let calls = 0;
    onAbort(c.signal, () => calls++);
    assert.equal(calls, 0);
    c.abort();
    c.abort();
    assert.equal(calls, 1);
  });

  test('calls fn at once for an already-aborted signal', () => {
    let calls = 0;
    const detach = onAbort(AbortSignal.abort(), () => calls++);
    assert.equal(calls, 1);
    detach();
    assert.equal(calls, 1);
  });

  test('the returned function detaches', () => {
    const c = new AbortController();
    let calls = 0;
    const detach = onAbort(c.signal, () => calls++);
    detach();
    c.abort();
    assert.equal(calls, 0);
  });

  test('no signal: never called, detach is harmless', () => {
    let calls = 0;
    const detach = onAbort(undefined, () => calls++);
    detach();
    assert.equal(calls, 0);
  });
});
