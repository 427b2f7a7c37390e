import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { terminationReport } from '../../../../src/controller/pod/observe-pod.js';
import {
  lastBytes,
  printable,
  toRunOutput,
  withReportedBytes,
} from '../../../../src/controller/sandboxrun/read-output.js';

describe('the output tail', () => {
  test('lastBytes keeps the end and never splits a character', () => {
    assert.equal(lastBytes('hello', 10), 'hello');
    assert.equal(lastBytes('hello', 3), 'llo');
    assert.equal(lastBytes('aé', 1), '', 'half of é is dropped, not garbled');
    assert.equal(lastBytes('aéb', 3), 'éb');
  });

  test('printable: control characters become U+FFFD; tabs and newlines stay', () => {
    assert.equal(printable('a\tb\r\nc\u0000\u001b[0m'), 'a\tb\nc\uFFFD\uFFFD[0m');
  });

  test('toRunOutput: whole output under the limits', () => {
    assert.deepEqual(toRunOutput('hi\n', false, 'hi\n', { tailBytes: 10, readBytes: 100 }), {
      tail: 'hi\n',
      truncated: false,
      bytes: 3,
    });
  });

  test('toRunOutput: a long output keeps its tail and says so', () => {
    const log = `${'x'.repeat(50)}END\n`;
    assert.deepEqual(toRunOutput(log, false, log, { tailBytes: 4, readBytes: 100 }), {
      tail: 'END\n',
      truncated: true,
      bytes: 54,
    });
  });

  test('toRunOutput: over the read limit, the tail comes from the second read', () => {
    const out = toRunOutput('y'.repeat(100), true, 'last line\n', { tailBytes: 64, readBytes: 100 });
    assert.deepEqual(out, { tail: 'last line\n', truncated: true, bytes: 100 });
  });
});

describe('terminationReport (the runner’s termination log)', () => {
  test('reads the runner’s JSON', () => {
    assert.deepEqual(
      terminationReport(
        '{"exitCode":137,"signal":9,"timedOut":true,"oomKilled":false,"stdoutBytes":0,"stderrBytes":0,"durationMs":2000}',
      ),
      {
        exitCode: 137,
        signal: 9,
        timedOut: true,
        oomKilled: false,
        stdoutBytes: 0,
        stderrBytes: 0,
        durationMs: 2000,
      },
    );
  });
  test('anything else is no report', () => {
    for (const t of [undefined, '', 'not json', '[]', '{"exitCode":"0"}', 'null'])
      assert.equal(terminationReport(t), undefined, String(t));
  });
});

describe('no output', () => {
  test('no tail at all (an empty string is not written)', () => {
    assert.deepEqual(toRunOutput('', false, '', { tailBytes: 10, readBytes: 100 }), {
      truncated: false,
      bytes: 0,
    });
  });
});

describe('withReportedBytes: the runner says how much the program wrote', () => {
  const report = {
    exitCode: 0,
    signal: 0,
    timedOut: false,
    oomKilled: false,
    stdoutBytes: 100_000,
    stderrBytes: 5,
    durationMs: 1,
  };
  test('past the output limit the log holds its head and tail: the count is the report’s, and truncated', () => {
    const read = { tail: 'end\n', truncated: true, bytes: 4130 };
    assert.deepEqual(withReportedBytes(read, report), { tail: 'end\n', truncated: true, bytes: 100_005 });
  });
  test('no report, or a log with all of it (and the runner’s own lines): what was read', () => {
    const read = { tail: 'all\n', truncated: false, bytes: 4 };
    assert.deepEqual(withReportedBytes(read, undefined), read);
    assert.deepEqual(withReportedBytes(read, { ...report, stdoutBytes: 4, stderrBytes: 0 }), read);
  });
});
