import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { REPLY_WAIT_MS, RunCleanups } from '../../../src/backends/run-cleanups.js';

/** Lets every pending promise callback run. */
const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A clean-up whose calls are counted, and whose `done` is recorded. */
function counted(cleanups: RunCleanups, replied: Promise<unknown> | undefined) {
  const seen = { work: 0, done: 0 };
  cleanups.after(
    replied,
    () => {
      seen.work++;
      return Promise.resolve();
    },
    () => void seen.done++,
  );
  return seen;
}

describe('run clean-ups', () => {
  test('wait for the reply to be out, then run once and say so', async () => {
    const cleanups = new RunCleanups();
    const reply = deferred();
    const seen = counted(cleanups, reply.promise);
    await flush();
    assert.deepEqual(seen, { work: 0, done: 0 }, 'nothing before the reply is out');
    reply.resolve();
    await flush();
    assert.deepEqual(seen, { work: 1, done: 1 });
  });

  test('without a reply to wait for, run at once', async () => {
    const seen = counted(new RunCleanups(), undefined);
    await flush();
    assert.deepEqual(seen, { work: 1, done: 1 });
  });

  test('a reply that never goes out holds the clean-up REPLY_WAIT_MS at most', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const seen = counted(new RunCleanups(), new Promise(() => {}));
    await flush();
    t.mock.timers.tick(REPLY_WAIT_MS - 1);
    await flush();
    assert.equal(seen.work, 0);
    t.mock.timers.tick(1);
    await flush();
    assert.deepEqual(seen, { work: 1, done: 1 });
  });

  test('a failed reply or a failed clean-up still ends it', async () => {
    const cleanups = new RunCleanups();
    let done = 0;
    cleanups.after(
      Promise.reject(new Error('the client went away')),
      () => Promise.reject(new Error('the engine is gone')),
      () => void done++,
    );
    await flush();
    assert.equal(done, 1);
    await cleanups.close();
  });

  test('close() stops waiting for replies and resolves once every clean-up, even one begun meanwhile, settled', async () => {
    const cleanups = new RunCleanups();
    const first = counted(cleanups, new Promise(() => {}));
    const slow = deferred();
    let second = false;
    const closed = cleanups.close();
    // A run that ends while the backend closes: its clean-up runs at once, and close() waits for it.
    cleanups.after(
      new Promise(() => {}),
      async () => {
        await slow.promise;
        second = true;
      },
      () => {},
    );
    let settled = false;
    void closed.then(() => (settled = true));
    await flush();
    assert.deepEqual(first, { work: 1, done: 1 }, 'the waiting one ran without its reply');
    assert.equal(settled, false, 'close() waits for the clean-up begun after it');
    slow.resolve();
    await closed;
    assert.equal(second, true);
  });
});
