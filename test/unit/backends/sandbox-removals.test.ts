import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { REMOVE_AFTER_RESULT_MS, SandboxRemovals } from '../../../src/backends/sandbox-removals.js';

/**
 * Removals whose starts and ends go to `log`: `schedule(name)` schedules one that ends when its
 * `end()` is called.
 */
function harness(): {
  log: string[];
  removals: SandboxRemovals;
  schedule: (name: string, signal?: AbortSignal) => { end: () => void };
} {
  const log: string[] = [];
  const removals = new SandboxRemovals();
  const schedule = (name: string, signal?: AbortSignal): { end: () => void } => {
    let end!: () => void;
    const ended = new Promise<void>((r) => (end = r));
    const remove = (): Promise<void> => {
      log.push(`start ${name}`);
      return ended;
    };
    removals.schedule(remove, () => log.push(`removed ${name}`), signal);
    return { end };
  };
  return { log, removals, schedule };
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('SandboxRemovals', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
  afterEach(() => mock.timers.reset());

  test('a removal starts REMOVE_AFTER_RESULT_MS after it is scheduled; removed() follows its end', async () => {
    const { log, removals, schedule } = harness();
    const a = schedule('a');
    mock.timers.tick(REMOVE_AFTER_RESULT_MS - 1);
    assert.deepEqual(log, []);
    mock.timers.tick(1);
    assert.deepEqual(log, ['start a']);
    a.end();
    await removals.settled();
    assert.deepEqual(log, ['start a', 'removed a']);
  });

  test("a cancelled run's removal (its signal aborted) starts at once", async () => {
    const { log, removals, schedule } = harness();
    const a = schedule('a', AbortSignal.abort());
    assert.deepEqual(log, ['start a']);
    a.end();
    await removals.settled();
    assert.deepEqual(log, ['start a', 'removed a']);
  });

  test('close() starts the waiting removals at once, and later ones without a wait; settled() waits for all', async () => {
    const { log, removals, schedule } = harness();
    const [a, b] = [schedule('a'), schedule('b')];
    removals.close();
    assert.deepEqual(log, ['start a', 'start b']);
    const c = schedule('c');
    assert.deepEqual(log, ['start a', 'start b', 'start c']);
    let settled = false;
    const all = removals.settled().then(() => (settled = true));
    a.end();
    b.end();
    await turn();
    assert.equal(settled, false, 'c is still being removed');
    c.end();
    await all;
    assert.deepEqual(log.slice(3).sort(), ['removed a', 'removed b', 'removed c']);
    mock.timers.tick(REMOVE_AFTER_RESULT_MS);
    assert.equal(log.filter((l) => l.startsWith('start')).length, 3, 'none starts twice');
  });
});
