/**
 * The stdio boundary with a real server: every line that is not one JSON-RPC message within the
 * size limit is answered with a JSON-RPC error, and the server reads on and answers the next.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { createMcpServer } from '../../../src/gateway/mcp/server.js';
import { serveStdio } from '../../../src/gateway/mcp/stdio.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';

const backend: SandboxBackend = {
  name: 'docker',
  start: () => assert.fail('no run in this test'),
  health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'up' }),
  close: () => Promise.resolve(),
};

interface Answer {
  id: number | string | null;
  result?: { tools?: unknown[] };
  error?: { code: number; message: string; data?: { code: string } };
}

test('bad lines are answered with JSON-RPC errors and the server reads on', async () => {
  const metrics = createMetrics();
  const deps = {
    service: new SandpitService({
      backend,
      policy: createPolicy(),
      logger: silentLogger(),
      metrics,
      slots: { maxConcurrent: 1, maxQueued: 0 },
    }),
    logger: silentLogger(),
    metrics,
    defaultPrincipal: LOCAL_PRINCIPAL,
    version: '0',
  };
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const answers: Answer[] = [];
  let out = '';
  stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (let nl = out.indexOf('\n'); nl !== -1; nl = out.indexOf('\n')) {
      answers.push(JSON.parse(out.slice(0, nl)) as Answer);
      out = out.slice(nl + 1);
    }
  });
  const served = serveStdio(createMcpServer(deps), {
    signal: new AbortController().signal,
    maxLineBytes: 1024,
    stdin,
    stdout,
  });
  const init = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
  };
  stdin.write(`${JSON.stringify(init)}\n`);
  stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
  stdin.write('not json\n');
  stdin.write(
    Buffer.concat([
      Buffer.from('{"jsonrpc":"2.0","id":3,"method":"x\xff'),
      Buffer.from([0xff]),
      Buffer.from('"}\n'),
    ]),
  );
  stdin.write('[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]\n');
  stdin.write('{"jsonrpc":"1.0","id":5,"method":7}\n');
  // Over the limit, in pieces, then the rest of the line.
  stdin.write(
    `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{"code":"${'x'.repeat(800)}`,
  );
  stdin.write(`${'x'.repeat(800)}"}}}\n\r\n`);
  stdin.write('{"jsonrpc":"2.0","id":7,"method":"tools/list"}\r\n');
  await waitFor(() => answers.some((a) => a.id === 7));
  stdin.end();
  await served;

  // The refusals are written at once, in order; the server's answers when it has them.
  assert.ok(
    answers.some((a) => a.id === 1 && a.result),
    'initialize answered',
  );
  const rest = answers.filter((a) => a.error);
  assert.deepEqual(
    rest.map((a) => [a.id, a.error?.code, a.error?.data?.code]),
    [
      [null, -32700, 'INVALID_REQUEST'],
      [null, -32700, 'INVALID_REQUEST'],
      [null, -32600, 'INVALID_REQUEST'],
      [5, -32600, 'INVALID_REQUEST'],
      [null, -32600, 'TOO_LARGE'],
    ],
  );
  assert.match(rest[1]?.error?.message ?? '', /not valid UTF-8/);
  assert.match(rest[2]?.error?.message ?? '', /batches are not accepted/);
  assert.match(rest[4]?.error?.message ?? '', /over the limit of 1024 bytes/);
  const last = answers.find((a) => a.id === 7);
  assert.ok((last?.result?.tools?.length ?? 0) > 0, 'the server still answers');
});

async function waitFor(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(ok(), 'timed out');
}
