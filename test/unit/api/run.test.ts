import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  isSafeRelativePath,
  isTerminal,
  MAX_ARG_STRING_BYTES,
  MAX_ARGV_ENV_BYTES,
  PHASES,
  PhaseSchema,
  REASONS,
  ReasonSchema,
  RunRequestSchema,
  RunResultSchema,
  TERMINAL_PHASES,
  type RunRequestInput,
} from '../../../src/api/run.js';

/** The issues of a failed parse as `path: message`. */
function issues(input: unknown): string[] {
  const r = RunRequestSchema.safeParse(input);
  assert.equal(r.success, false, `expected ${JSON.stringify(input)} to be refused`);
  return r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
}

const valid = (input: RunRequestInput): void => {
  const r = RunRequestSchema.safeParse(input);
  assert.ok(r.success, `expected valid: ${JSON.stringify(r.error?.issues)}`);
};

describe('phases and reasons', () => {
  test('the seven phases and twelve reasons of DESIGN §4a', () => {
    assert.deepEqual(PHASES, [
      'Pending',
      'Running',
      'Succeeded',
      'Failed',
      'TimedOut',
      'Rejected',
      'Cancelled',
    ]);
    assert.deepEqual(REASONS, [
      'Completed',
      'Error',
      'OOMKilled',
      'DeadlineExceeded',
      'PolicyDenied',
      'ImageNotFound',
      'RuntimeClassNotFound',
      'QuotaExceeded',
      'Unschedulable',
      'PendingTimeout',
      'Cancelled',
      'BackendError',
    ]);
  });

  test('isTerminal: everything but Pending and Running', () => {
    const want: Record<string, boolean> = {
      Pending: false,
      Running: false,
      Succeeded: true,
      Failed: true,
      TimedOut: true,
      Rejected: true,
      Cancelled: true,
    };
    for (const phase of PHASES) assert.equal(isTerminal(phase), want[phase], phase);
    assert.deepEqual([...TERMINAL_PHASES].sort(), [
      'Cancelled',
      'Failed',
      'Rejected',
      'Succeeded',
      'TimedOut',
    ]);
  });

  test('the schemas refuse names outside the lists', () => {
    assert.equal(PhaseSchema.safeParse('Done').success, false);
    assert.equal(PhaseSchema.safeParse('succeeded').success, false);
    assert.equal(ReasonSchema.safeParse('Timeout').success, false);
    assert.equal(ReasonSchema.parse('OOMKilled'), 'OOMKilled');
  });
});

describe('isSafeRelativePath', () => {
  const cases: [string, boolean][] = [
    ['a', true],
    ['a.txt', true],
    ['data/input.csv', true],
    ['.hidden', true],
    ['..foo', true],
    ['foo..', true],
    ['a/b/c/d', true],
    ['with space.txt', true],
    ['ünïcødé/文件.txt', true],
    ['a-b_c.d~', true],
    [Array(16).fill('d').join('/'), true],
    [Array(17).fill('d').join('/'), false],
    ['x'.repeat(255), true],
    ['x'.repeat(256), false],
    ['', false],
    ['/', false],
    ['/etc/passwd', false],
    ['//a', false],
    ['..', false],
    ['../a', false],
    ['a/..', false],
    ['a/../b', false],
    ['a/../../etc/passwd', false],
    ['.', false],
    ['./a', false],
    ['a/./b', false],
    ['a/.', false],
    ['a//b', false],
    ['a/', false],
    ['a\\b', false],
    ['..\\a', false],
    ['C:\\x', false],
    ['a\nb', false],
    ['a\rb', false],
    ['a\tb', false],
    ['a\u0000b', false],
    ['a\u001fb', false],
    ['a\u007fb', false],
    ['\u001b[31m', false],
  ];
  for (const [path, want] of cases) {
    test(`${JSON.stringify(path.length > 30 ? `${path.slice(0, 20)}…(${path.length})` : path)} → ${want}`, () => {
      assert.equal(isSafeRelativePath(path), want);
    });
  }
});

describe('RunRequestSchema', () => {
  test('a minimal template + code request gets its defaults', () => {
    assert.deepEqual(RunRequestSchema.parse({ template: 'python', code: 'print(1)' }), {
      template: 'python',
      code: 'print(1)',
      files: [],
      env: [],
    });
  });

  test('file defaults: utf8, not executable', () => {
    const r = RunRequestSchema.parse({ template: 'bash', code: 'x', files: [{ path: 'a', content: 'b' }] });
    assert.deepEqual(r.files, [{ path: 'a', content: 'b', encoding: 'utf8', executable: false }]);
  });

  test('the accepted combinations', () => {
    valid({ template: 'python', code: 'x' });
    valid({ template: 'python', command: ['python3', '-V'] });
    valid({ template: 'python', code: 'x', command: ['python3', '/sandpit/code/main.py'] });
    valid({ image: 'python:3.11', command: ['python3', '-V'] });
    valid({ image: 'python:3.11', template: 'python', code: 'x' });
  });

  const refused: { name: string; input: unknown; want: string[] }[] = [
    { name: 'neither code nor command', input: { template: 'python' }, want: ['code: give code or command'] },
    {
      name: 'neither template nor image',
      input: { command: ['ls'] },
      want: ['template: give a template or an image'],
    },
    {
      name: 'nothing at all',
      input: {},
      want: ['code: give code or command', 'template: give a template or an image'],
    },
    {
      name: 'code with an image but no template',
      input: { image: 'python:3.11', code: 'print(1)' },
      want: ['template: code needs a template (it is exposed at /sandpit/code/main.*)'],
    },
    {
      name: 'code with an image and a command but no template (it would be dropped)',
      input: { image: 'python:3.11', code: 'print(1)', command: ['python3', '-c', 'pass'] },
      want: ['template: code needs a template (it is exposed at /sandpit/code/main.*)'],
    },
    {
      name: 'code alone',
      input: { code: 'print(1)' },
      want: [
        'template: give a template or an image',
        'template: code needs a template (it is exposed at /sandpit/code/main.*)',
      ],
    },
    {
      name: 'duplicate file paths',
      input: {
        template: 'python',
        code: 'x',
        files: [
          { path: 'a', content: '1' },
          { path: 'b', content: '2' },
          { path: 'a', content: '3' },
          { path: 'a', content: '4' },
        ],
      },
      want: ['files.2.path: duplicate path', 'files.3.path: duplicate path'],
    },
    {
      name: 'a file that another file would need as its directory, in either order',
      input: {
        template: 'python',
        code: 'x',
        files: [
          { path: 'a', content: '1' },
          { path: 'a/b', content: '2' },
          { path: 'c/d/e', content: '3' },
          { path: 'c/d', content: '4' },
        ],
      },
      want: [
        'files.1.path: "a" is a file, so it cannot also be a directory',
        'files.2.path: "c/d" is a file, so it cannot also be a directory',
      ],
    },
    {
      name: 'a NUL byte in an env value or an argv element (exec(2) would cut it off)',
      input: { template: 'bash', command: ['echo', 'a\u0000b'], env: [{ name: 'X', value: 'y\u0000z' }] },
      want: ['command.1: must not contain a NUL byte', 'env.0.value: must not contain a NUL byte'],
    },
    {
      name: 'an unsafe file path',
      input: { template: 'python', code: 'x', files: [{ path: '../etc/passwd', content: '' }] },
      want: [
        'files.0.path: expected a relative path inside the workspace (no leading /, no .. or empty segments, at most 16 deep)',
      ],
    },
    {
      name: 'an empty command',
      input: { template: 'python', command: [] },
      want: ['command: Too small: expected array to have >=1 items'],
    },
    {
      name: 'an unknown field',
      input: { template: 'python', code: 'x', privileged: true },
      want: [': Unrecognized key: "privileged"'],
    },
    {
      name: 'an unknown field in resources',
      input: { template: 'python', code: 'x', resources: { gpu: 1 } },
      want: ['resources: Unrecognized key: "gpu"'],
    },
    {
      name: 'a bad template name',
      input: { template: 'Python', code: 'x' },
      want: ['template: expected a template name like python'],
    },
    {
      name: 'a bad env name',
      input: { template: 'python', code: 'x', env: [{ name: '1FOO', value: '' }] },
      want: ['env.0.name: expected a name like FOO_BAR (letters, digits, _)'],
    },
    {
      name: 'an env name with =',
      input: { template: 'python', code: 'x', env: [{ name: 'A=B', value: '' }] },
      want: ['env.0.name: expected a name like FOO_BAR (letters, digits, _)'],
    },
    {
      name: 'a bad runtime',
      input: { template: 'python', code: 'x', runtime: '../runsc' },
      want: ['runtime: expected a runtime name like runsc'],
    },
    {
      name: 'a fractional timeout',
      input: { template: 'python', code: 'x', timeoutSeconds: 1.5 },
      want: ['timeoutSeconds: Invalid input: expected int, received number'],
    },
  ];
  for (const c of refused) {
    test(`refused: ${c.name}`, () => {
      assert.deepEqual(issues(c.input), c.want);
    });
  }

  test('a bad file encoding is refused', () => {
    assert.deepEqual(
      issues({ template: 'python', code: 'x', files: [{ path: 'a', content: '', encoding: 'hex' }] }).map(
        (i) => i.split(':')[0],
      ),
      ['files.0.encoding'],
    );
  });

  test('non-positive timeouts and pids are refused', () => {
    for (const timeoutSeconds of [0, -1]) {
      assert.deepEqual(
        issues({ template: 'python', code: 'x', timeoutSeconds }).map((i) => i.split(':')[0]),
        ['timeoutSeconds'],
      );
    }
    for (const pids of [0, -5, 2.5]) {
      assert.deepEqual(
        issues({ template: 'python', code: 'x', resources: { pids } }).map((i) => i.split(':')[0]),
        ['resources.pids'],
      );
    }
  });

  const quantities: {
    field: 'cpu' | 'memory' | 'ephemeralStorage';
    ok: (string | number)[];
    bad: (string | number)[];
  }[] = [
    {
      field: 'cpu',
      ok: [1, 0.5, '0.5', '500m', '2', 0.001, '1m'],
      bad: ['lots', '1 core', -1, 0, '0', '0m', 0.0001, '0.0001', '-1'],
    },
    {
      field: 'memory',
      ok: ['256m', '512Mi', '1g', 1048576, '64k'],
      bad: ['big', '12 parsecs', -1, 0, '0', '0m', '0.5', 1.5],
    },
    { field: 'ephemeralStorage', ok: ['64Mi', '1g', 4096], bad: ['x', 0, '0', '0Mi', '0.1'] },
  ];
  for (const q of quantities) {
    test(`resources.${q.field}: accepted ${JSON.stringify(q.ok)}`, () => {
      for (const v of q.ok) valid({ template: 'python', code: 'x', resources: { [q.field]: v } });
    });
    test(`resources.${q.field}: refused ${JSON.stringify(q.bad)} (zero would mean unlimited to Docker)`, () => {
      for (const v of q.bad) {
        const got = issues({ template: 'python', code: 'x', resources: { [q.field]: v } });
        assert.equal(got.length, 1, `${JSON.stringify(v)}: ${got.join('; ')}`);
        assert.ok(got[0]!.startsWith(`resources.${q.field}: expected a`), got[0]);
        assert.match(got[0]!, /more than zero/);
      }
    });
  }

  test('every problem in one request is reported at once', () => {
    const got = issues({
      template: 'Bad Name',
      code: 'x',
      files: [{ path: '/abs', content: '' }],
      env: [{ name: '', value: '' }],
      resources: { memory: 'lots' },
      timeoutSeconds: -1,
      runtime: 'RUNC',
    });
    assert.deepEqual(got.map((i) => i.split(':')[0]).sort(), [
      'env.0.name',
      'files.0.path',
      'resources.memory',
      'runtime',
      'template',
      'timeoutSeconds',
    ]);
  });
});

describe('RunRequestSchema: what exec(2) cannot take', () => {
  test('an argument or a variable over MAX_ARG_STRLEN is refused, naming it; one byte under runs', () => {
    const long = 'x'.repeat(MAX_ARG_STRING_BYTES);
    assert.deepEqual(
      issues({ template: 'bash', command: ['echo', long] }).map((i) => i.split(':')[0]),
      ['command.1'],
    );
    valid({ template: 'bash', command: ['echo', long.slice(1)] });
    assert.deepEqual(
      issues({ template: 'bash', code: 'x', env: [{ name: 'V', value: long.slice(2) }] }).map(
        (i) => i.split(':')[0],
      ),
      ['env.0.value'],
    );
    valid({ template: 'bash', code: 'x', env: [{ name: 'V', value: long.slice(3) }] });
  });

  test(`argv and env over ${MAX_ARGV_ENV_BYTES} bytes in all are refused`, () => {
    const big = 'x'.repeat(100_000);
    const [issue] = issues({ template: 'bash', command: Array<string>(11).fill(big) });
    assert.match(issue ?? '', /^command: arguments and environment total 1100011 bytes, over the 1048576/);
    const env = Array.from({ length: 11 }, (_, i) => ({ name: `V${i}`, value: big }));
    assert.match(
      issues({ template: 'bash', code: 'x', env })[0] ?? '',
      /^env: arguments and environment total/,
    );
    valid({ template: 'bash', command: Array<string>(10).fill(big) });
  });
});

describe('RunResultSchema', () => {
  test('accepts a complete result and refuses an unknown phase', () => {
    const result = {
      runId: 'r1',
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
      durationMs: 12.5,
    };
    assert.deepEqual(RunResultSchema.parse(result), result);
    assert.equal(RunResultSchema.safeParse({ ...result, phase: 'Done' }).success, false);
    assert.equal(RunResultSchema.safeParse({ ...result, exitCode: null }).success, true);
    assert.equal(RunResultSchema.safeParse({ ...result, exitCode: undefined }).success, false);
  });
});
