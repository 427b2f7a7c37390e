import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AppError,
  ErrorCodes,
  isAppError,
  policyDenied,
  toAppError,
  type ErrorCode,
} from '../../../src/shared/errors.js';

describe('ErrorCodes', () => {
  const want: Record<ErrorCode, [number, number, boolean]> = {
    INVALID_REQUEST: [400, 64, false],
    POLICY_DENIED: [403, 77, false],
    UNAUTHORIZED: [401, 77, false],
    FORBIDDEN: [403, 77, false],
    NOT_FOUND: [404, 66, false],
    CONFLICT: [409, 65, false],
    TOO_LARGE: [413, 64, false],
    UNSUPPORTED_MEDIA_TYPE: [415, 64, false],
    BUSY: [429, 75, true],
    CANCELLED: [409, 130, false],
    CONFIG_INVALID: [500, 78, false],
    ENGINE_UNAVAILABLE: [503, 69, true],
    IMAGE_NOT_FOUND: [503, 69, false],
    RUNTIME_NOT_FOUND: [503, 69, false],
    IMAGE_OUTDATED: [503, 69, false],
    BACKEND_ERROR: [502, 70, true],
    GATEWAY_UNAVAILABLE: [502, 69, true],
    UNSUPPORTED: [501, 69, false],
    AUDIT_UNAVAILABLE: [503, 74, true],
    AUTH_UNAVAILABLE: [503, 69, true],
    INTERNAL: [500, 70, false],
  };

  test('the table has exactly these codes', () => {
    assert.deepEqual(Object.keys(ErrorCodes).sort(), Object.keys(want).sort());
  });

  for (const [code, [http, exit, retryable]] of Object.entries(want) as [
    ErrorCode,
    [number, number, boolean],
  ][]) {
    test(`${code}: HTTP ${http}, exit ${exit}, ${retryable ? 'retryable' : 'final'}`, () => {
      const e = new AppError(code, 'm');
      assert.equal(e.httpStatus, http);
      assert.equal(e.exitCode, exit);
      assert.equal(e.retryable, retryable);
    });
  }
});

describe('AppError', () => {
  test('is an Error with name, code, message, hint, violations and cause', () => {
    const cause = new Error('root');
    const e = new AppError('NOT_FOUND', 'no run r1', {
      hint: 'list runs',
      violations: [{ field: 'runId', message: 'unknown' }],
      cause,
    });
    assert.ok(e instanceof Error);
    assert.equal(e.name, 'AppError');
    assert.equal(e.code, 'NOT_FOUND');
    assert.equal(e.message, 'no run r1');
    assert.equal(e.hint, 'list runs');
    assert.deepEqual(e.violations, [{ field: 'runId', message: 'unknown' }]);
    assert.equal(e.cause, cause);
    assert.ok(e.stack?.includes('no run r1'));
  });

  test('without options: no hint, no violations, no cause', () => {
    const e = new AppError('INTERNAL', 'x');
    assert.equal(e.hint, undefined);
    assert.deepEqual(e.violations, []);
    assert.equal('cause' in e, false);
  });

  test('toJSON leaves out what is empty, and never the cause or stack', () => {
    assert.deepEqual(new AppError('BUSY', 'later', { cause: new Error('secret detail') }).toJSON(), {
      code: 'BUSY',
      message: 'later',
    });
    assert.deepEqual(JSON.parse(JSON.stringify(new AppError('BUSY', 'later', { hint: 'retry' }))), {
      code: 'BUSY',
      message: 'later',
      hint: 'retry',
    });
    const v = [{ field: 'a', message: 'b', limit: 1, requested: 2 }];
    assert.deepEqual(new AppError('POLICY_DENIED', 'no', { violations: v }).toJSON(), {
      code: 'POLICY_DENIED',
      message: 'no',
      violations: v,
    });
  });
});

describe('isAppError and toAppError', () => {
  test('isAppError', () => {
    assert.equal(isAppError(new AppError('INTERNAL', 'x')), true);
    assert.equal(isAppError(new Error('x')), false);
    assert.equal(isAppError({ code: 'INTERNAL', message: 'x' }), false);
    assert.equal(isAppError(undefined), false);
  });

  test('an AppError passes through untouched, whatever the fallback', () => {
    const e = new AppError('NOT_FOUND', 'x');
    assert.equal(toAppError(e, 'BACKEND_ERROR'), e);
  });

  test('an Error is wrapped with its message and kept as the cause', () => {
    const cause = new TypeError('boom');
    const e = toAppError(cause);
    assert.equal(e.code, 'INTERNAL');
    assert.equal(e.message, 'boom');
    assert.equal(e.cause, cause);
    assert.equal(toAppError(cause, 'BACKEND_ERROR').code, 'BACKEND_ERROR');
  });

  test('anything else is stringified', () => {
    assert.equal(toAppError('plain').message, 'plain');
    assert.equal(toAppError(42).message, '42');
    assert.equal(toAppError(undefined).message, 'undefined');
  });
});

test('policyDenied summarises every violation and carries them', () => {
  const violations = [
    { field: 'resources.cpu', message: '2 is over the ceiling of 1', limit: '1', requested: '2' },
    { field: 'network.egress', message: 'not available' },
  ];
  const e = policyDenied(violations);
  assert.equal(e.code, 'POLICY_DENIED');
  assert.equal(e.httpStatus, 403);
  assert.equal(
    e.message,
    'request denied by policy: resources.cpu: 2 is over the ceiling of 1; network.egress: not available',
  );
  assert.deepEqual(e.violations, violations);
  assert.match(e.hint ?? '', /ask the operator/);
});
