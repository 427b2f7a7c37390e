import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InflightCalls } from '../../../src/gateway/mcp/inflight.js';

const call = (id: unknown) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: {} });
const cancel = (requestId: unknown) => ({
  jsonrpc: '2.0',
  method: 'notifications/cancelled',
  params: { requestId },
});

test('a cancellation aborts the one call of that principal with that id', () => {
  const calls = new InflightCalls();
  let aborted = 0;
  calls.track('alice', call(3), () => aborted++);
  assert.equal(calls.cancelFrom('bob', cancel(3)), 0, 'another principal cannot cancel it');
  assert.equal(calls.cancelFrom('alice', cancel(4)), 0);
  assert.equal(calls.cancelFrom('alice', cancel('3')), 0, 'ids keep their JSON type');
  assert.equal(calls.cancelFrom('alice', [cancel(3)]), 1, 'batches are read too');
  assert.equal(aborted, 1);
});

test('an ambiguous id cancels nothing', () => {
  const calls = new InflightCalls();
  let aborted = 0;
  calls.track('alice', call(1), () => aborted++);
  calls.track('alice', call(1), () => aborted++);
  assert.equal(calls.cancelFrom('alice', cancel(1)), 0);
  assert.equal(aborted, 0);
});

test('forgetting a call removes it; notifications and junk are not tracked', () => {
  const calls = new InflightCalls();
  const forget = calls.track('alice', [call(1), cancel(9), null, 'x'], () => assert.fail('not cancelled'));
  assert.equal(calls.size, 1);
  forget();
  assert.equal(calls.size, 0);
  assert.equal(calls.cancelFrom('alice', cancel(1)), 0);
  assert.equal(calls.cancelFrom('alice', { method: 'notifications/cancelled' }), 0);
});
