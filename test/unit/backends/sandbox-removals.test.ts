import assert from 'node:assert/strict';
import { describe, mock, test } from 'node:test';
import { REMOVE_AFTER_RESULT_MS, SandboxRemovals } from '../../../src/backends/sandbox-removals.js';

/** A removal that records when it started and ends when told. */
function removal(log: string[], name: string): { remove: () => Promise<void>; end: () => void } {
  let end!: () => void;
  const ended = new Promise<void>((r) => (end = r));
  return {
    remove: () => {
      log.push(`start ${name}`);
      return ended;
    },
    end,
  };
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('SandboxRemovals', () => {
  test('a removal starts REMOVE_AFTER_RESULT_MS after it is scheduled; removed() follows its end', async (t) => {
    mock.timers.enable({ apis: ['setTimeout'] });
    t.after(() => mock.timers.reset());
    const log: string[] = [];
    const removals = new SandboxRemovals();
    const a = removal(log, 'a');
    removals.schedule(a.remove, () => log.push('removed a'));
    mock.timers.tick(REMOVE_AFTER_RESULT_MS - 1);
    assert.deepEqual(log, []);
    mock.timers.tick(1);
    assert.deepEqual(log, ['start a']);
    a.end();
    await removals.settled();
    assert.deepEqual(log, ['start a', 'removed a']);
  });

  test("a cancelled run's removal (its signal aborted) starts at once", async (t) => {
    mock.timers.enable({ apis: ['setTimeout'] });
    t.after(() => mock.timers.reset());
    const log: string[] = [];
    const removals = new SandboxRemovals();
    const a = removal(log, 'a');
    removals.schedule(a.remove, () => log.push('removed a'), AbortSignal.abort());
    assert.deepEqual(log, ['start a']);
    a.end();
    await removals.settled();
    assert.deepEqual(log, ['start a', 'removed a']);
  });

  test('close() starts the waiting removals at once, and later ones without a wait; settled() waits for all', async (t) => {
    mock.timers.enable({ apis: ['setTimeout'] });
    t.after(() => mock.timers.reset());
    const log: string[] = [];
    const removals = new SandboxRemovals();
    const [a, b, c] = [removal(log, 'a'), removal(log, 'b'), removal(log, 'c')];
    removals.schedule(a.remove, () => log.push('removed a'));
    removals.schedule(b.remove, () => log.push('removed b'));
    removals.close();
    assert.deepEqual(log, ['start a', 'start b']);
    removals.schedule(c.remove, () => log.push('removed c'));
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
