import assert from 'node:assert/strict';
import { test } from 'node:test';
import { primed } from '../../../src/gateway/http/primed.js';

async function* source(log: string[], fail = false): AsyncIterable<Buffer> {
  try {
    await Promise.resolve();
    if (fail) throw new Error('refused before any byte');
    yield Buffer.from('a');
    yield Buffer.from('b');
  } finally {
    log.push('closed');
  }
}

test('a failure before the first chunk rejects primed() itself, so the route can still answer with its status', async () => {
  await assert.rejects(primed(source([], true)), /refused before any byte/);
});

test('the chunks come through in order, the first one included', async () => {
  const got: string[] = [];
  for await (const c of await primed(source([]))) got.push(c.toString());
  assert.deepEqual(got, ['a', 'b']);
});

test('a consumer that stops before taking the first chunk still closes the source', async () => {
  const log: string[] = [];
  const body = await primed(source(log));
  await body[Symbol.asyncIterator]().return?.();
  assert.deepEqual(log, ['closed']);
});
