// Host-header validation with server.allowedHosts set as docs/mcp.md shows: /mcp and /metrics only
// under the allowed names, /health also under the loopback names a local probe uses.
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

/** GET `path` on the loopback listener with this Host header. */
function get(path: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
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
