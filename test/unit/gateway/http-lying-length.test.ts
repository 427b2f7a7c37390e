// A client with a valid token that declares a 64 MiB body and sends one byte: refused at once
// (413) and its connection closed, instead of holding it until Node's 300 s request timeout.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { createAuthenticator } from '../../../src/gateway/auth.js';
import { createHttpApp } from '../../../src/gateway/http/app.js';
import { listen, REQUEST_TIMEOUT_MS, type Listening } from '../../../src/gateway/http/listen.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';

const TOKEN = 'valid-token-0123456789';
const backend: SandboxBackend = {
  name: 'docker',
  start: () => assert.fail('no run in this test'),
  health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'up' }),
  close: () => Promise.resolve(),
};
const notUsed = () => assert.fail('the body is refused before the MCP route');

let server: Listening;
before(async () => {
  const metrics = createMetrics();
  const app = createHttpApp({
    service: new SandpitService({
      backend,
      policy: createPolicy(),
      logger: silentLogger(),
      metrics,
      slots: { maxConcurrent: 1, maxQueued: 0 },
    }),
    metrics,
    logger: silentLogger(),
    authenticator: createAuthenticator({ token: TOKEN, tokens: [] }, LOCAL_PRINCIPAL),
    mcp: { post: notUsed, get: notUsed, delete: notUsed, close: () => Promise.resolve(), sessions: 0 },
    bodyLimitBytes: 1024 * 1024,
    maxRequestsPerSecond: 100,
    anonymousId: LOCAL_PRINCIPAL.id,
    limitNote: 'test',
    allowedHosts: undefined,
    version: '0',
  });
  server = await listen(app, '127.0.0.1', 0);
});
after(() => server.close());

/** Sends the head of a request and one byte of its body; resolves with the status line and when the server closed. */
function lie(
  declared: number,
  waitMs: number,
): Promise<{ status: string; closedAfterMs: number | undefined }> {
  const { port } = new URL(server.url);
  return new Promise((resolve) => {
    const t0 = performance.now();
    let data = '';
    let closedAfterMs: number | undefined;
    const socket = connect(Number(port), '127.0.0.1', () => {
      socket.write(
        `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n{`,
      );
    });
    socket.on('data', (d: Buffer) => (data += d.toString('latin1')));
    socket.on('close', () => (closedAfterMs = performance.now() - t0));
    setTimeout(() => {
      socket.destroy();
      resolve({ status: data.split('\r\n')[0] ?? '', closedAfterMs });
    }, waitMs);
  });
}

test('a declared length over the limit is refused at once and its connection closed', async () => {
  const r = await lie(64 * 1024 * 1024, 2000);
  assert.equal(r.status, 'HTTP/1.1 413 Payload Too Large');
  assert.ok(r.closedAfterMs !== undefined && r.closedAfterMs < 2000, `closed after ${r.closedAfterMs} ms`);
});

test('a request must arrive whole within its timeout, far below Node’s 300 s default', () => {
  assert.ok(REQUEST_TIMEOUT_MS <= 30_000);
  assert.equal(server.server.requestTimeout, REQUEST_TIMEOUT_MS);
  assert.ok(server.server.headersTimeout <= 10_000);
});

test('the timeouts are the configured ones when given (server.headersTimeoutSeconds, requestTimeoutSeconds)', async () => {
  const other = await listen(() => undefined, '127.0.0.1', 0, { headersMs: 2000, requestMs: 4000 });
  try {
    assert.equal(other.server.headersTimeout, 2000);
    assert.equal(other.server.requestTimeout, 4000);
  } finally {
    await other.close();
  }
});
