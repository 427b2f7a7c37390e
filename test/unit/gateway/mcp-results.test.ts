import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunResult } from '../../../src/api/run.js';
import { renderRun } from '../../../src/gateway/mcp/render.js';
import { toolError } from '../../../src/gateway/mcp/results.js';
import { toSeedResult } from '../../../src/gateway/mcp/tools/execute-python-code.js';
import { AppError, policyDenied } from '../../../src/shared/errors.js';

const base: RunResult = {
  runId: 'run-1',
  phase: 'Succeeded',
  reason: 'Completed',
  exitCode: 0,
  timedOut: false,
  stdout: 'hi\n',
  stderr: '',
  truncated: false,
  stdoutBytes: 3,
  stderrBytes: 0,
  binaryOutput: false,
  durationMs: 12.4,
  template: 'python',
};

test('renderRun: a status line, then each non-empty stream', () => {
  assert.equal(
    renderRun(base),
    'Succeeded · exit code 0 · 12 ms · run-1 · python\n--- stdout (3 bytes) ---\nhi',
  );
  const timedOut: RunResult = {
    ...base,
    phase: 'TimedOut',
    reason: 'DeadlineExceeded',
    message: 'the deadline ended the run',
    exitCode: null,
    timedOut: true,
    stdout: '',
    stdoutBytes: 0,
    stderr: 'x',
    stderrBytes: 1,
    truncated: true,
  };
  assert.equal(
    renderRun(timedOut),
    'TimedOut · 12 ms · run-1 · python\nthe deadline ended the run\n--- stderr (1 bytes) ---\nx\n(output was truncated: head and tail kept, byte counts are exact)',
  );
});

test('toSeedResult: the seed-compatible snake_case shape', () => {
  assert.deepEqual(toSeedResult(base), {
    success: true,
    stdout: 'hi\n',
    stderr: '',
    exit_code: 0,
    timed_out: false,
    truncated: false,
    error: null,
    run_id: 'run-1',
    duration_ms: 12.4,
  });
  const failed = toSeedResult({
    ...base,
    phase: 'Failed',
    reason: 'Error',
    message: 'the program exited with code 1',
    exitCode: 1,
  });
  assert.equal(failed.success, false);
  assert.equal(failed.error, 'the program exited with code 1');
});

test('toolError: code and message, every violation with its limit, a hint, retryability', () => {
  const denied = toolError(
    policyDenied([{ field: 'resources.cpu', message: '4 is over the ceiling of 1', limit: '1' }]),
  );
  assert.equal(denied.isError, true);
  assert.deepEqual(denied.content, [
    {
      type: 'text',
      text:
        'POLICY_DENIED: request denied by policy: resources.cpu: 4 is over the ceiling of 1\n' +
        '  - resources.cpu: 4 is over the ceiling of 1 (limit: 1)\n' +
        'hint: change the named fields to fit within the limits, or ask the operator to raise them',
    },
  ]);
  const busy = toolError(new AppError('BUSY', 'busy, retry later: 8 runs in progress'));
  assert.match((busy.content[0] as { text: string }).text, /hint: retry later\nretryable: yes$/);
});
