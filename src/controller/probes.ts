/** The operator's HTTP endpoints: GET /healthz, /readyz and /metrics (Prometheus text). */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface ProbeDeps {
  registry: Registry;
  isReady(): boolean;
  isHealthy(): boolean;
}

export interface ProbeServer {
  url: string;
  close(): Promise<void>;
}

export function createProbeServer(deps: ProbeDeps): Server {
  return createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (status: number, body: string, type = 'text/plain; charset=utf-8'): void => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return reply(405, 'method not allowed\n');
    if (path === '/healthz') return deps.isHealthy() ? reply(200, 'ok\n') : reply(503, 'unhealthy\n');
    if (path === '/readyz') return deps.isReady() ? reply(200, 'ok\n') : reply(503, 'not ready\n');
    if (path === '/metrics') {
      deps.registry.metrics().then(
        (text) => reply(200, text, deps.registry.contentType),
        (e: unknown) => reply(500, `metrics failed: ${(e as Error).message}\n`),
      );
      return;
    }
    reply(404, 'not found\n');
  });
}

export async function listenProbes(deps: ProbeDeps, host: string, port: number): Promise<ProbeServer> {
  const server = createProbeServer(deps);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const shown = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shown}:${addr.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
