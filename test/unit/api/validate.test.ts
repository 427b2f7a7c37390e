import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as z from 'zod';
import { RunRequestSchema } from '../../../src/api/run.js';
import {
  issuesToViolations,
  MAX_INPUT_DEPTH,
  parseInput,
  unsafeJsonViolations,
} from '../../../src/api/validate.js';
import { AppError } from '../../../src/shared/errors.js';

function thrown(fn: () => unknown): AppError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof AppError, `expected AppError, got ${String(e)}`);
    return e;
  }
  assert.fail('expected a throw');
}

test('parseInput returns the parsed value, defaults applied', () => {
  const r = parseInput(RunRequestSchema, { template: 'python', code: 'x' });
  assert.deepEqual(r.files, []);
  assert.deepEqual(r.env, []);
});

test('parseInput throws INVALID_REQUEST with one violation per bad field', () => {
  const e = thrown(() =>
    parseInput(RunRequestSchema, {
      template: 'python',
      code: 'x',
      timeoutSeconds: 0,
      files: [{ path: '../x', content: '' }],
    }),
  );
  assert.equal(e.code, 'INVALID_REQUEST');
  assert.equal(e.httpStatus, 400);
  assert.deepEqual(
    e.violations.map((v) => v.field),
    ['files.0.path', 'timeoutSeconds'],
  );
  assert.match(e.message, /^invalid request: /);
  assert.match(e.message, /files\.0\.path: expected a relative path/);
  assert.match(e.message, /timeoutSeconds: /);
  assert.match(e.hint ?? '', /fix the named fields/);
});

test('parseInput names what was being parsed', () => {
  const e = thrown(() => parseInput(z.object({ n: z.number() }), { n: 'x' }, 'session'));
  assert.match(e.message, /^invalid session: n: /);
});

test('a problem with the whole input is named (request)', () => {
  const e = thrown(() => parseInput(RunRequestSchema, 'not an object'));
  assert.deepEqual(
    e.violations.map((v) => v.field),
    ['(request)'],
  );
  const f = thrown(() => parseInput(RunRequestSchema, { template: 'python', code: 'x', extra: 1 }));
  assert.deepEqual(f.violations, [{ field: '(request)', message: 'Unrecognized key: "extra"' }]);
});

test('issuesToViolations joins numeric paths with dots', () => {
  assert.deepEqual(
    issuesToViolations([
      { code: 'custom', path: ['files', 3, 'path'], message: 'm', input: undefined },
      { code: 'custom', path: [], message: 'top', input: undefined },
    ]),
    [
      { field: 'files.3.path', message: 'm' },
      { field: '(request)', message: 'top' },
    ],
  );
});

test('a lone surrogate anywhere is refused, naming the field, before it could reach the sandbox as U+FFFD', () => {
  const e = thrown(() =>
    parseInput(RunRequestSchema, {
      template: 'python',
      code: 'print("\ud800")',
      files: [{ path: 'a', content: 'ok \udfff' }],
    }),
  );
  assert.equal(e.code, 'INVALID_REQUEST');
  assert.deepEqual(e.violations.map((v) => v.field).sort(), ['code', 'files.0.content']);
  assert.match(e.message, /code: is not well-formed Unicode: a lone surrogate \(U\+D800\) at character 7/);
  // A surrogate pair is one character, and fine.
  assert.equal(
    parseInput(RunRequestSchema, { template: 'python', code: 'print("\ud83d\ude00")' }).code,
    'print("😀")',
  );
  const key = thrown(() => parseInput(RunRequestSchema, { template: 'python', code: 'x', '\ud800': 1 }));
  assert.deepEqual(key.violations, [
    { field: '(request)', message: 'has a key that is not well-formed Unicode' },
  ]);
});

test('input nested deeper than MAX_INPUT_DEPTH is refused without walking it recursively', () => {
  const deep = JSON.parse(
    `{"template":"python","code":"x","files":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
  );
  const e = thrown(() => parseInput(RunRequestSchema, deep));
  assert.equal(e.code, 'INVALID_REQUEST');
  assert.equal(e.violations.length, 1);
  assert.match(e.violations[0]?.field ?? '', /^files(\.0){31}$/);
  assert.equal(e.violations[0]?.message, `nests deeper than ${MAX_INPUT_DEPTH} levels`);
  assert.deepEqual(unsafeJsonViolations({ a: [{ b: 'fine' }] }), []);
});
