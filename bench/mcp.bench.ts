/**
 * MCP overhead: run_code over MCP (stdio to the built CLI; Streamable HTTP stateful and stateless on
 * 127.0.0.1) against the raw `service.run()` of the same request, interleaved in one run. Every
 * path is wired as `sandpit mcp` / `sandpit serve` wire it (same config, warm pools included).
 * Target: at most 10 ms of p50 overhead.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { loadContext, wireDocker } from '../src/cmd/context.js';
import { createAuthenticator } from '../src/gateway/auth.js';
import { bodyLimitFor, createHttpApp } from '../src/gateway/http/app.js';
import { LOOPBACK_HOSTS } from '../src/gateway/http/host-validation.js';
import { listen, type Listening } from '../src/gateway/http/listen.js';
import { createMcpHttp, type McpHttp } from '../src/gateway/mcp/http.js';
import { LOCAL_PRINCIPAL } from '../src/gateway/principal.js';
import type { SandpitService } from '../src/gateway/service.js';
import { createMetrics } from '../src/observability/metrics.js';
import { cleanEnv, connectStdio, ensureBuilt } from '../test/e2e/helpers.js';
import { requireDocker } from '../test/support/docker.js';
import { interleaved, report, target } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const REQUEST = { template: 'python', code: 'print(1)' };

function check(stdout: unknown): void {
  if (stdout !== '1\n') throw new Error(`unexpected output ${JSON.stringify(stdout)}`);
}

async function httpClient(
  service: SandpitService,
  stateless: boolean,
): Promise<{ client: Client; mcp: McpHttp; server: Listening }> {
  const ctx = loadContext({ logLevel: 'warn' });
  const deps = {
    service,
    logger: ctx.logger,
    metrics: createMetrics(),
    defaultPrincipal: LOCAL_PRINCIPAL,
    version: 'bench',
  };
  const mcp = createMcpHttp(deps, { stateless });
  const app = createHttpApp({
    ...deps,
    authenticator: createAuthenticator({ tokens: [] }, LOCAL_PRINCIPAL),
    mcp,
    bodyLimitBytes: bodyLimitFor(ctx.config.sandbox.maxRequestBytes),
    limitNote: 'bench',
    allowedHosts: LOOPBACK_HOSTS,
  });
  const server = await listen(app, '127.0.0.1', 0);
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
  return { client, mcp, server };
}

const viaMcp = (client: Client) => async (): Promise<void> => {
  const r = (await client.callTool({ name: 'run_code', arguments: REQUEST })) as CallToolResult;
  check(r.structuredContent?.stdout);
};

export default async function bench(): Promise<void> {
  await requireDocker();
  ensureBuilt();
  const ctx = loadContext({ logLevel: 'warn' });
  const { service } = await wireDocker(ctx);
  const stdio = await connectStdio({ env: cleanEnv({ SANDPIT_LOGGING_LEVEL: 'warn' }) });
  const stateful = await httpClient(service, false);
  const stateless = await httpClient(service, true);
  try {
    const series = await interleaved(
      ROUNDS,
      {
        'raw service.run()': async () => check((await service.run(REQUEST, LOCAL_PRINCIPAL)).stdout),
        'MCP stdio (built CLI)': viaMcp(stdio.client),
        'MCP HTTP stateful': viaMcp(stateful.client),
        'MCP HTTP stateless': viaMcp(stateless.client),
      },
      3,
    );
    const rows = report(
      'run_code over MCP vs raw service.run() (python print(1))',
      series,
      'raw service.run()',
    );
    const raw = rows[0]!.p50;
    for (const row of rows.slice(1)) {
      const overhead = row.p50 - raw;
      target(
        `${row.name}: p50 overhead <= 10 ms`,
        overhead <= 10,
        `${overhead.toFixed(1)} ms (${row.p50.toFixed(1)} vs ${raw.toFixed(1)} ms, ${(row.p50 / raw).toFixed(2)}x)`,
      );
    }
  } finally {
    await stdio.close();
    for (const h of [stateful, stateless]) {
      await h.client.close();
      await h.mcp.close();
      await h.server.close();
    }
    await service.shutdown();
  }
}
