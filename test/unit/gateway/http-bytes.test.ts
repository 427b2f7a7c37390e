/**
 * Bytes that are not text, at the HTTP boundary: a JSON body that is not UTF-8 (REST and /mcp)
 * and a URL path that is not percent-encoded UTF-8 are refused as INVALID_REQUEST naming what,
 * never decoded into U+FFFD and run, never a 500.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { serveMemoryGateway, type MemoryGateway } from '../../support/memory-gateway.js';
import { MCP_ACCEPT } from '../../support/mcp-raw.js';

const TOKEN = 'admin-token-0123456789';
let gateway: MemoryGateway;
before(async () => {
  gateway = await serveMemoryGateway({ token: TOKEN, other: 'other-token-0123456789' });
});
after(() => gateway.close());

const notUtf8 = Buffer.concat([
  Buffer.from('{"template":"python","code":"print(\'a'),
  Buffer.from([0xff, 0xc3]),
  Buffer.from('\')"}'),
]);

async function send(method: string, path: string, body?: Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

test('REST: a JSON body that is not UTF-8 is 400 INVALID_REQUEST naming the body; no session is made', async () => {
  for (const path of ['/sessions', '/runs']) {
    const r = await send('POST', path, notUtf8);
    assert.equal(r.status, 400, path);
    const error = r.body.error as { code: string; message: string; violations: { field: string }[] };
    assert.equal(error.code, 'INVALID_REQUEST');
    assert.equal(error.message, 'the request body is not valid UTF-8');
    assert.deepEqual(error.violations, [{ field: '(request body)', message: 'not valid UTF-8' }]);
  }
  assert.equal(gateway.sandboxes.length, 0);
  // UTF-8 that is valid still works, and so does another declared charset body-parser decodes.
  assert.equal((await send('POST', '/sessions', Buffer.from('{"template":"python"}'))).status, 201);
  const utf16 = Buffer.from('{"template":"python"}', 'utf16le');
  assert.equal(
    (await send('POST', '/sessions', utf16, { 'Content-Type': 'application/json; charset=utf-16le' })).status,
    201,
  );
});

test('/mcp: a body that is not UTF-8 is a JSON-RPC parse error (-32700) carrying the typed error', async () => {
  const r = await send('POST', '/mcp', notUtf8, MCP_ACCEPT);
  assert.equal(r.status, 400);
  const error = r.body.error as { code: number; message: string; data: { code: string } };
  assert.equal(error.code, -32700);
  assert.equal(error.message, 'Parse error: the request body is not valid UTF-8');
  assert.equal(error.data.code, 'INVALID_REQUEST');
});

test('a URL path that is not percent-encoded UTF-8 is 400 INVALID_REQUEST, not a 500', async () => {
  const id = ((await send('POST', '/sessions', Buffer.from('{"template":"python"}'))).body as { id: string })
    .id;
  for (const name of ['a%zzb', 'a%ED%A0%80b', '%FF']) {
    const r = await send('PUT', `/sessions/${id}/files/${name}`, Buffer.from('x'), {
      'Content-Type': 'application/octet-stream',
    });
    assert.equal(r.status, 400, name);
    const error = r.body.error as { code: string; violations: { field: string }[] };
    assert.equal(error.code, 'INVALID_REQUEST', name);
    assert.equal(error.violations[0]?.field, '(path)');
  }
});
