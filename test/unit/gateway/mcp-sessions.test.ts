/**
 * The session tools and resources through the SDK's real client, over an in-memory session
 * backend: structured content in each tool's output schema, an image read back as image content,
 * a large file as a resource_link, the file template readable as a resource, errors as isError
 * results naming the field. The same flows on the real engine are the docker tier's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { buildToolCatalog, createMcpServer } from '../../../src/gateway/mcp/server.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { memorySessions } from '../../support/memory-sessions.js';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

async function connect() {
  const { service, metrics, sandboxes } = memorySessions();
  const deps = { service, logger: silentLogger(), metrics, defaultPrincipal: LOCAL_PRINCIPAL, version: '0' };
  const server = createMcpServer(deps, buildToolCatalog(deps));
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'unit', version: '1' });
  await Promise.all([server.connect(b), client.connect(a)]);
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  return { client, call, sandboxes };
}

const structured = (r: CallToolResult): Record<string, unknown> => {
  assert.ok(!r.isError, JSON.stringify(r.content));
  return r.structuredContent as Record<string, unknown>;
};

test('create, exec, write, read (text, image, large), list, resources/read, delete', async () => {
  const { client, call, sandboxes } = await connect();
  const session = structured(await call('sandbox_create', { language: 'python', timeoutSeconds: 10 }));
  assert.equal(session.state, 'Ready');
  const id = session.id as string;

  const exec = structured(await call('sandbox_exec', { sessionId: id, command: ['python', 'main.py'] }));
  assert.equal(exec.phase, 'Succeeded');
  assert.equal(exec.stdout, 'python main.py\n');
  assert.match(exec.execId as string, /^exec-/);

  structured(await call('sandbox_write_file', { sessionId: id, path: 'notes.txt', content: 'hello' }));
  structured(
    await call('sandbox_write_file', {
      sessionId: id,
      path: 'plot.png',
      content: PNG.toString('base64'),
      encoding: 'base64',
    }),
  );
  sandboxes[0]?.files.set('big.bin', Buffer.alloc(300 * 1024, 1));

  const text = await call('sandbox_read_file', { sessionId: id, path: 'notes.txt' });
  assert.equal(structured(text).content, 'hello');
  const image = await call('sandbox_read_file', { sessionId: id, path: 'plot.png' });
  assert.deepEqual(image.content[0], { type: 'image', data: PNG.toString('base64'), mimeType: 'image/png' });
  const big = await call('sandbox_read_file', { sessionId: id, path: 'big.bin' });
  const link = big.content.find((c) => c.type === 'resource_link');
  assert.ok(link && link.type === 'resource_link');
  assert.equal(link.uri, `sandpit://sessions/${id}/files/big.bin`);
  assert.equal(structured(big).content, undefined);

  const read = await client.readResource({ uri: `sandpit://sessions/${id}/files/notes.txt` });
  assert.deepEqual(read.contents[0], {
    uri: `sandpit://sessions/${id}/files/notes.txt`,
    mimeType: 'text/plain',
    text: 'hello',
  });

  const listed = structured(await call('sandbox_list_files', { sessionId: id }));
  assert.deepEqual((listed.entries as { path: string }[]).map((e) => e.path).sort(), [
    'big.bin',
    'notes.txt',
    'plot.png',
  ]);
  assert.equal((structured(await call('sandbox_list', {})).sessions as unknown[]).length, 1);
  assert.equal(structured(await call('sandbox_delete', { sessionId: id })).state, 'Deleted');
  await client.close();
});

test('bad input is an isError result naming the field; nothing is written', async () => {
  const { client, call, sandboxes } = await connect();
  const id = structured(await call('sandbox_create', {})).id as string;
  const escape = await call('sandbox_write_file', { sessionId: id, path: '../x', content: 'x' });
  assert.equal(escape.isError, true);
  assert.match(JSON.stringify(escape.content), /INVALID_REQUEST[\s\S]*path/);
  const b64 = await call('sandbox_write_file', {
    sessionId: id,
    path: 'x',
    content: '!!',
    encoding: 'base64',
  });
  assert.match(JSON.stringify(b64.content), /content is not valid base64/);
  assert.equal(sandboxes[0]?.files.size, 0);
  const unknown = await call('sandbox_exec', { sessionId: 'ses-nope', command: ['ls'] });
  assert.match(JSON.stringify(unknown.content), /NOT_FOUND: no session ses-nope/);
  await client.close();
});

test('a resource that is not there is MCP -32002 with the typed error; a path that leaves the workspace -32602', async () => {
  const { client, call } = await connect();
  const id = structured(await call('sandbox_create', {})).id as string;
  const refused =
    (code: number, appCode: string) => (e: Error & { code?: number; data?: { code?: string } }) => {
      assert.equal(e.code, code, e.message);
      assert.equal(e.data?.code, appCode);
      return true;
    };
  for (const uri of [
    'sandpit://sessions/ses-0000000000000000/files/x',
    `sandpit://sessions/${id}/files/missing.txt`,
    'sandpit://runs/run-000000000000/files/x',
  ])
    await assert.rejects(client.readResource({ uri }), refused(-32002, 'NOT_FOUND'), uri);
  await assert.rejects(
    client.readResource({ uri: `sandpit://sessions/${id}/files/..%2F..%2Fetc%2Fpasswd` }),
    refused(-32602, 'INVALID_REQUEST'),
  );
  await assert.rejects(
    client.subscribeResource({ uri: 'sandpit://sessions/ses-0000000000000000/files/x' }),
    refused(-32002, 'NOT_FOUND'),
  );
  await client.close();
});
