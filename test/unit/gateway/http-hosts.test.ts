// Host-header validation with server.allowedHosts set as docs/mcp.md shows: /mcp and /metrics only
// under the allowed names, /health also under the loopback names a local probe uses. Origin
// validation: a request a page of another origin sent is refused on every route but /health.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { createAuthenticator } from '../../../src/gateway/auth.js';
import { createHttpApp } from '../../../src/gateway/http/app.js';
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
const notUsed = () => assert.fail('no MCP request in this test');

let server: ReturnType<ReturnType<typeof createHttpApp>['listen']>;
let port = 0;
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
    authenticator: createAuthenticator({ token: undefined, tokens: [] }, LOCAL_PRINCIPAL),
    mcp: { post: notUsed, get: notUsed, delete: notUsed, close: () => Promise.resolve(), sessions: 0 },
    bodyLimitBytes: 1024,
    maxRequestsPerSecond: 100,
    anonymousId: LOCAL_PRINCIPAL.id,
    limitNote: '',
    allowedHosts: ['sandpit.example.com'],
    version: '0',
  });
  await new Promise<void>((resolve) => {
    server = app.listen(0, '127.0.0.1', () => resolve());
  });
  port = (server.address() as AddressInfo).port;
});
after(() => server.close());

/** GET `path` on the loopback listener with this Host header (and Origin, when given). */
function get(path: string, host: string, origin?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = { host, ...(origin === undefined ? {} : { origin }) };
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

test('/health answers a local probe under every loopback name', async () => {
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, 'sandpit.example.com'])
    assert.equal(await get('/health', host), 200, host);
});

test('/health still refuses other names; /metrics and /mcp only the allowed one', async () => {
  assert.equal(await get('/health', 'evil.example'), 403);
  assert.equal(await get('/metrics', `127.0.0.1:${port}`), 403);
  assert.equal(await get('/mcp', `localhost:${port}`), 403);
  assert.equal(await get('/metrics', 'sandpit.example.com'), 200);
});

test('a foreign Origin is refused (403) on /mcp, the REST API, /metrics and /openapi.json; /health answers', async () => {
  const host = 'sandpit.example.com';
  for (const origin of [
    'https://evil.example',
    'http://sandpit.example.com.evil.example',
    'null',
    'file://',
  ]) {
    for (const path of ['/mcp', '/sessions', '/runs/x', '/metrics', '/openapi.json'])
      assert.equal(await get(path, host, origin), 403, `${origin} ${path}`);
    assert.equal(await get('/health', host, origin), 200, origin);
  }
});

test("the server's own origin, and no Origin at all (a client that is not a browser), go on", async () => {
  for (const origin of [undefined, 'http://sandpit.example.com', 'https://SANDPIT.example.com'])
    assert.equal(await get('/openapi.json', 'sandpit.example.com', origin), 200, origin);
  assert.equal(
    await get('/openapi.json', 'sandpit.example.com:8443', 'https://sandpit.example.com:8443'),
    200,
  );
  // Another port is another origin.
  assert.equal(
    await get('/openapi.json', 'sandpit.example.com:8443', 'https://sandpit.example.com:9999'),
    403,
  );
});
