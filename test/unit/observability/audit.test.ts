/** The audit record: its shape for a run, what the digest covers, and the preview rules. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AuditRecordSchema, PREVIEW_CHARS } from '../../../src/api/audit.js';
import { RunRequestSchema, type RunRequestInput } from '../../../src/api/run.js';
import {
  auditCommand,
  buildRunAudit,
  bytesIn,
  commandDigest,
  previewOf,
  type AuditOutcome,
} from '../../../src/observability/audit.js';
import { evaluate, type EffectiveSpec } from '../../../src/policy/evaluate.js';
import { createPolicy } from '../../../src/policy/policy.js';

function spec(input: RunRequestInput): EffectiveSpec {
  const r = evaluate(RunRequestSchema.parse(input), createPolicy());
  if (!r.ok) throw new Error(JSON.stringify(r.violations));
  return r.spec;
}

const OUTCOME: AuditOutcome = {
  runId: 'run-0123456789ab',
  phase: 'Failed',
  reason: 'Error',
  exitCode: 3,
  durationMs: 41,
  stdoutBytes: 12,
  stderrBytes: 5,
};
const TIME = new Date('2026-03-04T05:06:07.089Z');

describe('a run’s audit record', () => {
  const code = 'import os\nprint(os.environ["API_KEY"])';
  const s = spec({
    template: 'python',
    code,
    files: [{ path: 'data.csv', content: 'secret,file,content\n' }],
    stdin: 'hello',
    env: [{ name: 'API_KEY', value: 'sk-live-value' }],
  });
  const record = buildRunAudit({
    spec: s,
    outcome: OUTCOME,
    principal: 'ci-bot',
    backend: 'docker',
    time: TIME,
  });

  test('has every field, in the shared schema', () => {
    assert.deepEqual(record, {
      time: '2026-03-04T05:06:07.089Z',
      event: 'run',
      runId: 'run-0123456789ab',
      principal: 'ci-bot',
      backend: 'docker',
      template: 'python',
      image: 'sandpit/python:3.11',
      command: {
        digest: commandDigest({ argv: s.argv, code: s.code?.content, files: s.files, stdin: s.stdin }),
        preview: 'import os ↵ print(os.environ["API_KEY"])',
      },
      limits: {
        cpu: '1',
        memoryBytes: 512 * 1024 ** 2,
        pids: 128,
        workspaceBytes: 64 * 1024 ** 2,
        tmpBytes: 64 * 1024 ** 2,
        timeoutSeconds: 30,
        outputBytes: 1024 ** 2,
      },
      network: 'none',
      exitCode: 3,
      durationMs: 41,
      bytesIn: Buffer.byteLength(code) + 'secret,file,content\n'.length + 'hello'.length,
      bytesOut: 17,
      outcome: { phase: 'Failed', reason: 'Error' },
    });
    assert.deepEqual(AuditRecordSchema.parse(JSON.parse(JSON.stringify(record))), record);
  });

  test('never carries env values, file contents, stdin or the token', () => {
    const text = JSON.stringify(record);
    for (const secret of ['sk-live-value', 'secret,file,content', 'hello'])
      assert.ok(!text.includes(secret), `the record contains ${secret}`);
  });

  test('bytes in count code, files and stdin; bytes out both streams', () => {
    assert.equal(bytesIn({ argv: ['x'] }), 0);
    assert.equal(
      bytesIn({
        argv: ['x'],
        code: Buffer.from('ab'),
        files: [{ path: 'f', content: Buffer.from('cde') }],
        stdin: Buffer.from('f'),
      }),
      6,
    );
  });

  test('a run with no template or runtime leaves those keys out', () => {
    const r = buildRunAudit({
      spec: spec({ image: 'sandpit/bash:5', command: ['ls', '-la'] }),
      outcome: { ...OUTCOME, phase: 'Succeeded', reason: 'Completed', exitCode: 0 },
      principal: 'local',
      backend: 'docker',
      time: TIME,
    });
    assert.ok(!('template' in r) && !('runtime' in r));
    assert.equal(r.command.preview, 'ls -la');
    assert.deepEqual(r.outcome, { phase: 'Succeeded', reason: 'Completed' });
  });
});

describe('the command digest', () => {
  const base = { argv: ['python3', 'main.py'], code: Buffer.from('print(1)') };
  const digest = commandDigest(base);

  test('is sha256 hex, stable for the same input', () => {
    assert.match(digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal(commandDigest({ ...base }), digest);
  });

  test('changes with argv, code, a file’s path or content, and stdin', () => {
    const variants = [
      { ...base, argv: ['python3', 'other.py'] },
      { ...base, code: Buffer.from('print(2)') },
      { ...base, files: [{ path: 'a', content: Buffer.from('x') }] },
      { ...base, files: [{ path: 'b', content: Buffer.from('x') }] },
      { ...base, files: [{ path: 'a', content: Buffer.from('y') }] },
      { ...base, stdin: Buffer.from('in') },
      // argv boundaries count: ["ab"] is not ["a", "b"]
      { argv: ['python3main.py'], code: base.code },
    ];
    const digests = variants.map(commandDigest);
    assert.equal(new Set([digest, ...digests]).size, variants.length + 1);
  });
});

describe('the preview', () => {
  test('is the code when there is some, else the argv as a shell would read it', () => {
    assert.equal(
      auditCommand({ argv: ['python3', '/sandpit/code/main.py'], code: Buffer.from('print(1)') }).preview,
      'print(1)',
    );
    assert.equal(
      auditCommand({ argv: ['bash', '-c', "echo 'hi' there"], code: Buffer.alloc(0) }).preview,
      `bash -c 'echo '\\''hi'\\'' there'`,
    );
    assert.equal(auditCommand({ argv: ['ls', '-la', '/tmp/x.txt', 'a=b'] }).preview, 'ls -la /tmp/x.txt a=b');
  });

  test('is one line: line breaks as ↵, tabs, control characters and runs of blanks as one space', () => {
    assert.equal(previewOf('a\nb\r\nc\rd'), 'a ↵ b ↵ c ↵ d');
    assert.equal(previewOf('  def f():\n\n\n\treturn  1\n'), 'def f(): ↵ return 1');
    assert.equal(previewOf('x\u0000\u001b[31my\u2028z'), 'x [31my z');
    // eslint-disable-next-line no-control-regex
    assert.ok(!/[\n\r\u0000-\u001f]/.test(previewOf('a\nb\tc\u0007')));
  });

  test(`keeps the first ${PREVIEW_CHARS} characters and marks the cut with …`, () => {
    const long = 'x'.repeat(200);
    assert.equal(previewOf(long), `${'x'.repeat(PREVIEW_CHARS)}…`);
    assert.equal(
      previewOf('y'.repeat(PREVIEW_CHARS)),
      'y'.repeat(PREVIEW_CHARS),
      'exactly the limit is not cut',
    );
    // Characters, not UTF-16 units: an emoji is never split into half a surrogate pair.
    const emoji = previewOf('😀'.repeat(100));
    assert.equal([...emoji].length, PREVIEW_CHARS + 1);
    assert.ok(emoji.endsWith('😀…'));
  });
});
