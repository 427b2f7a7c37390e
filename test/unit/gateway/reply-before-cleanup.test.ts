/**
 * The transports tell the backend when a run's reply is out (StartOptions.replied), so that Docker
 * and oci remove its sandbox after it, not while it goes out: an MCP tool call (over a real
 * Client and server linked in memory) and a REST POST /runs (over the real HTTP app on loopback).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { classify } from '../../../src/api/outcome.js';
import { buildResult } from '../../../src/api/result.js';
import type { SandboxBackend, StartOptions } from '../../../src/backends/types.js';
import { createAuthenticator } from '../../../src/gateway/auth.js';
import { createHttpApp } from '../../../src/gateway/http/app.js';
import { listen, type Listening } from '../../../src/gateway/http/listen.js';
import { createMcpServer } from '../../../src/gateway/mcp/server.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';

/** Each run: whether its reply had gone out when its result was handed over (it must not have). */
const runs: { replied: Promise<unknown> | undefined; outAtResult: boolean }[] = [];

const backend: SandboxBackend = {
  name: 'docker',
  start(spec, options: StartOptions) {
    const run = { replied: options.replied, outAtResult: false };
    runs.push(run);
    let out = false;
    void options.replied?.then(() => (out = true));
    const result = Promise.resolve().then(() => {
      run.outAtResult = out;
      return buildResult({
        runId: options.runId,
        subject: spec,
        outcome: classify({ exitCode: 0, timedOut: false, oomKilled: false, cancelled: false }),
        stdout: { text: 'hi\n', bytes: 3, truncated: false, binary: false },
        stderr: { text: '', bytes: 0, truncated: false, binary: false },
        startedAt: Date.now(),
        finishedAt: Date.now(),
        backend: 'docker',
        served: 'cold',
      });
    });
    return { runId: options.runId, output: (async function* () {})(), result, cleanedUp: result.then() };
  },
  health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'stand-in' }),
  close: () => Promise.resolve(),
};

const metrics = createMetrics();
const service = new SandpitService({
  backend,
  policy: createPolicy(),
  logger: silentLogger(),
  metrics,
  slots: { maxConcurrent: 2, maxQueued: 0 },
});
let client: Client;
let server: Listening;
before(async () => {
  const mcp = createMcpServer({
    service,
    logger: silentLogger(),
    metrics,
    defaultPrincipal: LOCAL_PRINCIPAL,
    version: '0.0.0-test',
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  client = new Client({ name: 'unit', version: '1' });
  await Promise.all([mcp.connect(b), client.connect(a)]);
  const notUsed = () => assert.fail('no MCP over HTTP here');
  const app = createHttpApp({
    service,
    metrics,
    logger: silentLogger(),
    authenticator: createAuthenticator({ tokens: [] }, LOCAL_PRINCIPAL),
    mcp: { post: notUsed, get: notUsed, delete: notUsed, close: () => Promise.resolve(), sessions: 0 },
    bodyLimitBytes: 1024 * 1024,
    limitNote: 'test',
    allowedHosts: undefined,
    maxRequestsPerSecond: 1000,
    anonymousId: LOCAL_PRINCIPAL.id,
    version: '0.0.0-test',
  });
  server = await listen(app, '127.0.0.1', 0);
});
after(async () => {
  await client.close();
  await server.close();
});

/** The last run's reply settles (within 5 s) once its caller has it, and had not when its result came. */
async function repliedAfterResult(): Promise<void> {
  const run = runs.at(-1)!;
  assert.ok(run.replied, 'the transport gave the backend a reply to wait for');
  assert.equal(run.outAtResult, false, 'the reply was out before the result existed');
  const late = new Promise((_, reject) => setTimeout(() => reject(new Error('never replied')), 5000).unref());
  await Promise.race([run.replied, late]);
}

for (const name of ['run_code', 'run_command', 'execute_python_code']) {
  test(`MCP ${name}: the backend hears that the reply is out once the client has it`, async () => {
    const args =
      name === 'run_command'
        ? { command: ['true'] }
        : name === 'run_code'
          ? { code: 'print(1)' }
          : { code_string: '1' };
    const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
    assert.notEqual(r.isError, true, JSON.stringify(r.content));
    await repliedAfterResult();
  });
}

test('REST POST /runs: the backend hears that the reply is out once the response is sent', async () => {
  const res = await fetch(`${server.url}/runs`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ template: 'python', code: 'print(1)' }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(((await res.json()) as { stdout: string }).stdout, 'hi\n');
  await repliedAfterResult();
});
