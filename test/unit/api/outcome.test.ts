import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CANCELLED_FACTS, classify, failedFacts, type RunFacts } from '../../../src/api/outcome.js';

const base: RunFacts = { exitCode: 0, timedOut: false, oomKilled: false, cancelled: false };

describe('classify', () => {
  const cases: { name: string; facts: Partial<RunFacts>; phase: string; reason: string; message?: RegExp }[] =
    [
      { name: 'exit 0', facts: {}, phase: 'Succeeded', reason: 'Completed' },
      {
        name: 'exit 1',
        facts: { exitCode: 1 },
        phase: 'Failed',
        reason: 'Error',
        message: /exited with code 1$/,
      },
      { name: 'exit 137', facts: { exitCode: 137 }, phase: 'Failed', reason: 'Error', message: /code 137/ },
      {
        name: 'no exit code',
        facts: { exitCode: null },
        phase: 'Failed',
        reason: 'Error',
        message: /code unknown/,
      },
      {
        name: 'failure',
        facts: { failure: 'runner crashed' },
        phase: 'Failed',
        reason: 'BackendError',
        message: /^runner crashed$/,
      },
      { name: 'empty failure message', facts: { failure: '' }, phase: 'Failed', reason: 'BackendError' },
      {
        name: 'OOM',
        facts: { oomKilled: true, exitCode: 137 },
        phase: 'Failed',
        reason: 'OOMKilled',
        message: /out of memory/,
      },
      {
        name: 'timed out',
        facts: { timedOut: true, exitCode: 137 },
        phase: 'TimedOut',
        reason: 'DeadlineExceeded',
        message: /deadline/,
      },
      {
        name: 'cancelled',
        facts: { cancelled: true, exitCode: null },
        phase: 'Cancelled',
        reason: 'Cancelled',
        message: /cancelled/,
      },
      // precedence: cancelled > timedOut > oomKilled > failure > exit code
      {
        name: 'cancelled beats everything',
        facts: { cancelled: true, timedOut: true, oomKilled: true, failure: 'x', exitCode: 1 },
        phase: 'Cancelled',
        reason: 'Cancelled',
      },
      {
        name: 'timedOut beats OOM, failure and exit',
        facts: { timedOut: true, oomKilled: true, failure: 'x', exitCode: 0 },
        phase: 'TimedOut',
        reason: 'DeadlineExceeded',
      },
      {
        name: 'OOM beats failure and exit 0',
        facts: { oomKilled: true, failure: 'x', exitCode: 0 },
        phase: 'Failed',
        reason: 'OOMKilled',
      },
      {
        name: 'failure beats exit 0',
        facts: { failure: 'x', exitCode: 0 },
        phase: 'Failed',
        reason: 'BackendError',
      },
    ];
  for (const c of cases) {
    test(c.name, () => {
      const r = classify({ ...base, ...c.facts });
      assert.equal(r.phase, c.phase);
      assert.equal(r.reason, c.reason);
      if (c.message) assert.match(r.message ?? '', c.message);
      if (c.phase === 'Succeeded') assert.equal(r.message, undefined);
    });
  }
});

test('the cancelled and failed facts classify as Cancelled and BackendError, with no exit code', () => {
  assert.deepEqual(classify(CANCELLED_FACTS), {
    phase: 'Cancelled',
    reason: 'Cancelled',
    message: 'the run was cancelled',
    exitCode: null,
  });
  assert.deepEqual(classify(failedFacts('engine said no')), {
    phase: 'Failed',
    reason: 'BackendError',
    message: 'engine said no',
    exitCode: null,
  });
});
