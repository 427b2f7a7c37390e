import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_ARG_STRING_BYTES } from '../../../src/api/run.js';
import {
  ExecRequestSchema,
  fromSeedSessionBody,
  SessionRequestSchema,
  toWorkspacePath,
} from '../../../src/api/session.js';

describe('toWorkspacePath', () => {
  const cases: [string, string | undefined][] = [
    ['script.py', 'script.py'],
    ['./data/in.csv', 'data/in.csv'],
    ['a//b/', 'a/b'],
    ['/workspace', ''],
    ['/workspace/out/plot.png', 'out/plot.png'],
    ['.', ''],
    ['../etc/passwd', undefined],
    ['a/../../b', undefined],
    ['/etc/passwd', undefined],
    ['/workspaces/x', undefined],
    ['a\0b', undefined],
    [`${'n'.repeat(256)}`, undefined],
    [`${'d/'.repeat(2048)}x`, undefined],
  ];
  for (const [input, want] of cases) {
    test(JSON.stringify(input.length > 40 ? `${input.slice(0, 20)}…(${input.length})` : input), () => {
      assert.equal(toWorkspacePath(input), want);
    });
  }
});

describe('SessionRequestSchema', () => {
  test("the seed's body: image and timeout, the timeout as the exec default", () => {
    const r = SessionRequestSchema.parse(fromSeedSessionBody({ image: 'python:3.11', timeout: 30 }));
    assert.equal(r.image, 'python:3.11');
    assert.equal(r.timeoutSeconds, 30);
    assert.deepEqual(r.env, []);
  });

  test('a template or an image is needed; unknown fields and twice-named variables are refused', () => {
    assert.equal(SessionRequestSchema.safeParse({}).success, false);
    assert.equal(SessionRequestSchema.safeParse({ template: 'python', colour: 'red' }).success, false);
    const twice = SessionRequestSchema.safeParse({
      template: 'python',
      env: [{ name: 'A', value: '1' }],
      secrets: [{ name: 'A', value: '2' }],
    });
    assert.equal(twice.success, false);
  });
});

describe('ExecRequestSchema', () => {
  test('exactly one of command and shell', () => {
    assert.equal(ExecRequestSchema.safeParse({ command: ['ls'] }).success, true);
    assert.equal(ExecRequestSchema.safeParse({ shell: 'ls | wc -l' }).success, true);
    assert.equal(ExecRequestSchema.safeParse({}).success, false);
    assert.equal(ExecRequestSchema.safeParse({ command: ['ls'], shell: 'ls' }).success, false);
  });

  test('a command that is not an array, and a cwd outside the workspace, name their field', () => {
    const notArray = ExecRequestSchema.safeParse({ command: 'python script.py' });
    assert.equal(notArray.success, false);
    assert.deepEqual(
      notArray.error?.issues.map((i) => i.path.join('.')),
      ['command'],
    );
    const outside = ExecRequestSchema.safeParse({ command: ['ls'], cwd: '../..' });
    assert.deepEqual(
      outside.error?.issues.map((i) => i.path.join('.')),
      ['cwd'],
    );
    assert.equal(ExecRequestSchema.safeParse({ command: ['ls'], cwd: '/workspace/src' }).success, true);
  });

  test('what exec(2) cannot take is refused here, naming the field: a NUL, an argument over MAX_ARG_STRLEN, too much in all', () => {
    const fields = (input: unknown): string[] =>
      (ExecRequestSchema.safeParse(input).error?.issues ?? []).map((i) => i.path.join('.'));
    assert.deepEqual(fields({ command: ['echo', 'a\0b'] }), ['command.1']);
    assert.deepEqual(fields({ shell: 'echo a\0b' }), ['shell']);
    assert.deepEqual(fields({ command: ['echo', 'x'.repeat(MAX_ARG_STRING_BYTES)] }), ['command.1']);
    assert.deepEqual(fields({ command: ['echo', 'x'.repeat(MAX_ARG_STRING_BYTES - 1)] }), []);
    const big = 'x'.repeat(100_000);
    assert.deepEqual(fields({ command: ['echo', ...Array<string>(6).fill(big)] }), ['command']);
    assert.deepEqual(
      fields({ shell: 'true', env: Array.from({ length: 6 }, (_, i) => ({ name: `V${i}`, value: big })) }),
      ['shell'],
    );
    const session = SessionRequestSchema.safeParse({
      template: 'python',
      secrets: Array.from({ length: 6 }, (_, i) => ({ name: `S${i}`, value: big })),
    });
    assert.deepEqual(
      session.error?.issues.map((i) => i.path.join('.')),
      ['env'],
    );
  });
});
