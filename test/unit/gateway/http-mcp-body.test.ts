// What POST /mcp takes before the MCP transport sees it: a JSON body, else a JSON-RPC error with
// the typed one as its data (a 415 for another Content-Type, a 400 for a body that cannot be read).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { Request, Response } from 'express';
import { serveMemoryGateway, type MemoryGateway } from '../../support/memory-gateway.js';

const TOKEN = 'mcp-body-token-0123456789';
const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} });

let gateway: MemoryGateway;
before(async () => {
  const reached = (req: Request, res: Response): void => void res.json({ reached: req.body as unknown });
  gateway = await serveMemoryGateway({
    token: TOKEN,
    other: 'other-token-0123456789',
    mcp: { post: reached, get: reached, delete: reached, close: () => Promise.resolve(), sessions: 0 },
  });
});
after(() => gateway.close());

function post(headers: Record<string, string>, body: string | Buffer) {
  return fetch(`${gateway.url}/mcp`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, ...headers },
    body,
  });
}

test('a body that is not declared JSON is a 415, as a JSON-RPC error, and never reaches the transport', async () => {
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
    const res = await post(type ? { 'Content-Type': type } : {}, INITIALIZE);
    assert.equal(res.status, 415, String(type));
    const body = (await res.json()) as { error: { code: number; data: { code: string } } };
    assert.equal(body.error.code, -32600);
    assert.equal(body.error.data.code, 'UNSUPPORTED_MEDIA_TYPE');
  }
});

test('a body that is not what its Content-Encoding says is a 400 INVALID_REQUEST; one that is, is read', async () => {
  const lying = await post({ 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, INITIALIZE);
  assert.equal(lying.status, 400);
  const body = (await lying.json()) as { error: { code: number; data: { code: string } } };
  assert.equal(body.error.code, -32600);
  assert.equal(body.error.data.code, 'INVALID_REQUEST');
  const honest = await post(
    { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
    gzipSync(INITIALIZE),
  );
  assert.equal(honest.status, 200);
  assert.deepEqual(await honest.json(), { reached: JSON.parse(INITIALIZE) });
});
