import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RunRequestSchema, RunResultSchema } from '../../../../src/api/run.js';
import type { SandboxRunStatus } from '../../../../src/api/v1alpha1/sandboxrun.js';
import {
  exactStatusOutput,
  INTERLEAVED_NOTE,
  outputFromStatus,
  resultFromStatus,
  type FinishedRun,
} from '../../../../src/backends/kubernetes/run-result.js';
import { StreamCapture } from '../../../../src/runner/capture.js';
import { evaluate, type EffectiveSpec } from '../../../../src/policy/evaluate.js';
import { createPolicy } from '../../../../src/policy/policy.js';

const e = evaluate(RunRequestSchema.parse({ template: 'python', code: 'print(1)' }), createPolicy());
assert.ok(e.ok);
const spec: EffectiveSpec = e.spec;

const captured = (text: string) => {
  const c = new StreamCapture({ headBytes: 1024, tailBytes: 1024 });
  c.add(Buffer.from(text));
  return c.finish();
};

const finished = (status: SandboxRunStatus, text = ''): FinishedRun => ({
  runId: 'run-1',
  spec,
  status,
  output: captured(text),
  startedAt: Date.parse('2026-01-01T00:00:00Z'),
  finishedAt: Date.parse('2026-01-01T00:00:02.5Z'),
});

describe('resultFromStatus: the controller decides phase, reason and exit code', () => {
  const cases: { status: SandboxRunStatus; exitCode: number | null; timedOut: boolean }[] = [
    { status: { phase: 'Succeeded', reason: 'Completed', exitCode: 0 }, exitCode: 0, timedOut: false },
    {
      status: { phase: 'Failed', reason: 'Error', exitCode: 3, message: 'the program exited with code 3' },
      exitCode: 3,
      timedOut: false,
    },
    { status: { phase: 'Failed', reason: 'OOMKilled', exitCode: 137 }, exitCode: 137, timedOut: false },
    {
      status: { phase: 'TimedOut', reason: 'DeadlineExceeded', exitCode: 137 },
      exitCode: 137,
      timedOut: true,
    },
    { status: { phase: 'Cancelled', reason: 'Cancelled' }, exitCode: null, timedOut: false },
    {
      status: { phase: 'Failed', reason: 'ImageNotFound', message: 'ErrImageNeverPull' },
      exitCode: null,
      timedOut: false,
    },
    { status: { phase: 'Failed', reason: 'PendingTimeout' }, exitCode: null, timedOut: false },
    {
      status: { phase: 'Rejected', reason: 'PolicyDenied', message: 'denied by policy' },
      exitCode: null,
      timedOut: false,
    },
  ];
  for (const c of cases) {
    test(`${c.status.phase}/${c.status.reason}`, () => {
      const r = resultFromStatus(finished(c.status));
      assert.equal(r.phase, c.status.phase);
      assert.equal(r.reason, c.status.reason);
      assert.equal(r.exitCode, c.exitCode);
      assert.equal(r.timedOut, c.timedOut);
      assert.equal(r.message, c.status.message);
      assert.equal(r.backend, 'kubernetes');
      assert.equal(r.served, 'cold');
      assert.equal(r.durationMs, 2500);
      assert.ok(RunResultSchema.safeParse(r).success);
    });
  }

  test('served: warm when a pool pod served it (the status says so), else cold', () => {
    const warm = resultFromStatus(
      finished({ phase: 'Succeeded', reason: 'Completed', exitCode: 0, served: 'warm', pool: 'python' }),
    );
    assert.equal(warm.served, 'warm');
    assert.ok(RunResultSchema.safeParse(warm).success);
    const cold = resultFromStatus(
      finished({ phase: 'Succeeded', reason: 'Completed', exitCode: 0, served: 'cold' }),
    );
    assert.equal(cold.served, 'cold');
  });

  test('output goes to stdout, stderr stays empty, and the message says the streams are interleaved', () => {
    const r = resultFromStatus(
      finished({ phase: 'Succeeded', reason: 'Completed', exitCode: 0 }, 'out\nerr\n'),
    );
    assert.equal(r.stdout, 'out\nerr\n');
    assert.equal(r.stdoutBytes, 8);
    assert.equal(r.stderr, '');
    assert.equal(r.stderrBytes, 0);
    assert.equal(r.message, INTERLEAVED_NOTE);
  });

  test('a note on the output joins the controller message', () => {
    const r = resultFromStatus({
      ...finished({ phase: 'Failed', reason: 'Error', exitCode: 1, message: 'exited 1' }, 'x'),
      outputNote: 'the pod log could not be read',
    });
    assert.equal(r.message, `exited 1; the pod log could not be read; ${INTERLEAVED_NOTE}`);
  });

  test('a failed name lookup in the interleaved log gives the no-network hint, as on Docker', () => {
    const r = resultFromStatus(
      finished(
        { phase: 'Failed', reason: 'Error', exitCode: 1 },
        'socket.gaierror: [Errno -3] Temporary failure in name resolution\n',
      ),
    );
    assert.equal(r.hint, 'this sandbox has no network (egress: none)');
    assert.equal(
      'hint' in resultFromStatus(finished({ phase: 'Failed', reason: 'Error', exitCode: 1 }, 'boom\n')),
      false,
    );
  });
});

describe('outputFromStatus: the status tail as a fallback', () => {
  test('absent: empty', () => {
    assert.deepEqual(outputFromStatus(undefined), { text: '', bytes: 0, truncated: false, binary: false });
  });

  test('whole: the tail is the output', () => {
    assert.deepEqual(outputFromStatus({ tail: 'hello\n', truncated: false, bytes: 6 }), {
      text: 'hello\n',
      bytes: 6,
      truncated: false,
      binary: false,
    });
  });

  test('truncated: says how many bytes are not shown', () => {
    const out = outputFromStatus({ tail: 'end\n', truncated: true, bytes: 10_004 });
    assert.equal(out.text, '[… 10000 bytes not shown …]\nend\n');
    assert.equal(out.bytes, 10_004);
    assert.equal(out.truncated, true);
  });
});

describe('exactStatusOutput: the status tail is the output only when nothing was cut or replaced', () => {
  test('whole and untouched: the bytes', () => {
    assert.deepEqual(
      exactStatusOutput({ tail: 'héllo\n', truncated: false, bytes: 7 }),
      Buffer.from('héllo\n'),
    );
  });
  test('no output at all: empty', () => {
    assert.deepEqual(exactStatusOutput({ truncated: false, bytes: 0 }), Buffer.alloc(0));
  });
  test('truncated, CRLF made LF, control characters or invalid UTF-8 replaced, absent: not exact', () => {
    assert.equal(exactStatusOutput({ tail: 'end\n', truncated: true, bytes: 9000 }), undefined);
    assert.equal(exactStatusOutput({ tail: 'a\nb\n', truncated: false, bytes: 6 }), undefined);
    assert.equal(exactStatusOutput({ tail: 'bell \uFFFD\n', truncated: false, bytes: 7 }), undefined);
    assert.equal(exactStatusOutput(undefined), undefined);
  });
});
