import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bodyLimitFor } from '../../../src/gateway/http/app.js';
import { fromBodyParser, jsonRpcError } from '../../../src/gateway/http/errors.js';
import { hostnameOf, isLoopback } from '../../../src/gateway/http/host-validation.js';

const parserError = (type: string, extra: object = {}) => Object.assign(new Error(type), { type, ...extra });

test('body-parser failures map to AppErrors; unknown ones are left alone', () => {
  const large = fromBodyParser(parserError('entity.too.large', { length: 500, limit: 100 }), 'policy note');
  assert.equal(large?.code, 'TOO_LARGE');
  assert.equal(large?.httpStatus, 413);
  assert.equal(large?.message, 'request body of 500 bytes is over the limit of 100 bytes');
  assert.match(large?.hint ?? '', /policy note/);
  assert.deepEqual(large?.violations, [{ field: '(request body)', message: 'too large', limit: 100 }]);
  assert.equal(fromBodyParser(parserError('entity.parse.failed'), '')?.code, 'INVALID_REQUEST');
  assert.equal(fromBodyParser(parserError('charset.unsupported'), '')?.code, 'INVALID_REQUEST');
  assert.equal(fromBodyParser(new Error('other'), ''), undefined);
  // A body that is not what its Content-Encoding says: zlib's error, made a 400 by body-parser.
  const undecodable = fromBodyParser(
    Object.assign(new Error('incorrect header check'), { status: 400, code: 'Z_DATA_ERROR' }),
    '',
  );
  assert.equal(undecodable?.code, 'INVALID_REQUEST');
  assert.equal(undecodable?.message, 'the request body cannot be read: incorrect header check');
  assert.equal(fromBodyParser(Object.assign(new Error('socket'), { status: 500 }), ''), undefined);
  // The router's 400 for a path that is not percent-encoded UTF-8 is not a body's.
  assert.equal(
    fromBodyParser(Object.assign(new URIError('Failed to decode'), { status: 400 }), ''),
    undefined,
  );
});

test('JSON-RPC error bodies', () => {
  assert.deepEqual(jsonRpcError(-32600, 'bad'), {
    jsonrpc: '2.0',
    error: { code: -32600, message: 'bad' },
    id: null,
  });
  assert.deepEqual(jsonRpcError(-32001, 'x', { code: 'UNAUTHORIZED' }), {
    jsonrpc: '2.0',
    error: { code: -32001, message: 'x', data: { code: 'UNAUTHORIZED' } },
    id: null,
  });
});

test('the body limit leaves room for escaping and base64 around the policy size', () => {
  assert.equal(bodyLimitFor(4 * 1024 ** 2), 8 * 1024 ** 2 + 64 * 1024);
});

test('Host header names and loopback addresses', () => {
  assert.equal(hostnameOf('127.0.0.1:8080'), '127.0.0.1');
  assert.equal(hostnameOf('LocalHost:1'), 'localhost');
  assert.equal(hostnameOf('[::1]:8080'), '[::1]');
  assert.equal(hostnameOf(undefined), undefined);
  assert.equal(hostnameOf('a b'), undefined);
  for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]'])
    assert.equal(isLoopback(h), true, h);
  for (const h of ['0.0.0.0', '10.0.0.1', '::', 'example.com']) assert.equal(isLoopback(h), false, h);
});
