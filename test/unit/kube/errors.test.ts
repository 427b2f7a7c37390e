import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiException } from '@kubernetes/client-node';
import {
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  KubeApiError,
  statusError,
  toKubeError,
  unlessNotFound,
} from '../../../src/kube/errors.js';

const status = (code: number, reason: string, message: string): string =>
  JSON.stringify({ kind: 'Status', code, reason, message });

describe('toKubeError: every failure becomes one KubeApiError', () => {
  test('an ApiException (its body a JSON string): status, reason and the server’s message', () => {
    const e = toKubeError(
      new ApiException(409, 'Conflict', status(409, 'AlreadyExists', 'pods "p" already exists'), {}),
      'create Pod ns/p',
    );
    assert.ok(e instanceof KubeApiError);
    assert.equal(e.status, 409);
    assert.equal(e.reason, 'AlreadyExists');
    assert.equal(e.message, 'create Pod ns/p: pods "p" already exists');
    assert.ok(isAlreadyExists(e) && !isConflict(e));
  });

  test('a watch or log failure (an Error with statusCode) keeps its status', () => {
    const e = toKubeError(Object.assign(new Error('Gone'), { statusCode: 410 }), 'watch /api/v1/pods');
    assert.equal(e.status, 410);
    assert.ok(isGone(e));
  });

  test('an unreachable apiserver: status 0, ENGINE_UNAVAILABLE (retryable)', () => {
    const e = toKubeError(new Error('connect ECONNREFUSED 127.0.0.1:6443'), 'get Pod ns/p');
    assert.equal(e.status, 0);
    assert.equal(e.code, 'ENGINE_UNAVAILABLE');
    assert.equal(e.retryable, true);
  });

  test('a WebSocket failure (attach, exec: an ErrorEvent, not an Error) says what it says', () => {
    const event = { type: 'error', message: 'Unexpected server response: 403', error: new Error('403') };
    const e = toKubeError(event, 'attach to Pod ns/p');
    assert.equal(e.message, 'attach to Pod ns/p: Unexpected server response: 403');
  });

  test('an in-stream watch ERROR (a metav1.Status)', () => {
    const e = statusError({ code: 410, reason: 'Expired', message: 'too old resource version' }, 'watch x');
    assert.ok(isGone(e));
    assert.equal(e.message, 'watch x: too old resource version');
  });

  test('a KubeApiError passes through unchanged', () => {
    const e = new KubeApiError('x', { code: 'NOT_FOUND', status: 404, reason: 'NotFound' });
    assert.equal(toKubeError(e, 'y'), e);
    assert.ok(isNotFound(e));
  });
});

describe('unlessNotFound', () => {
  test('undefined for a 404, the value otherwise, other failures rethrown', async () => {
    const notFound = new KubeApiError('gone', { code: 'NOT_FOUND', status: 404, reason: 'NotFound' });
    assert.equal(await unlessNotFound(Promise.reject(notFound)), undefined);
    assert.equal(await unlessNotFound(Promise.resolve(7)), 7);
    const forbidden = new KubeApiError('no', { code: 'FORBIDDEN', status: 403, reason: 'Forbidden' });
    await assert.rejects(unlessNotFound(Promise.reject(forbidden)), forbidden);
  });
});
