/**
 * An in-process Streamable HTTP gateway on 127.0.0.1, wired the way `sandpit serve` wires it, and a
 * real MCP client connected to it: what the benchmarks call run_code through.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { loadContext } from '../../src/cmd/wiring.js';
import { createAuthenticator } from '../../src/gateway/auth.js';
import { bodyLimitFor, createHttpApp } from '../../src/gateway/http/app.js';
import { LOOPBACK_HOSTS } from '../../src/gateway/http/host-validation.js';
import { listen, type Listening } from '../../src/gateway/http/listen.js';
import type { McpHttp } from '../../src/gateway/http/app.js';
import { createMcpHttp } from '../../src/gateway/mcp/http.js';
import { LOCAL_PRINCIPAL } from '../../src/gateway/principal.js';
import type { SandpitService } from '../../src/gateway/service.js';
import { createMetrics } from '../../src/observability/metrics.js';

export interface HttpGateway {
  url: string;
  mcp: McpHttp;
  server: Listening;
  /** A new MCP client session on this gateway. */
  connect(): Promise<Client>;
  close(): Promise<void>;
}

export async function startHttpGateway(service: SandpitService, stateless = false): Promise<HttpGateway> {
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
    // The bench measures the gateway's path, not its per-principal rate limit.
    maxRequestsPerSecond: 1_000_000,
    anonymousId: LOCAL_PRINCIPAL.id,
  });
  const server = await listen(app, '127.0.0.1', 0);
  const clients: Client[] = [];
  return {
    url: server.url,
    mcp,
    server,
    connect: async () => {
      const client = new Client({ name: 'bench', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
      clients.push(client);
      return client;
    },
    close: async () => {
      await Promise.all(clients.map((c) => c.close()));
      await mcp.close();
      await server.close();
    },
  };
}

/** Calls run_code and returns its structured result, throwing on a tool error. */
export async function runCode(
  client: Client,
  args: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const r = (await client.callTool({ name: 'run_code', arguments: args })) as CallToolResult;
  if (r.isError) throw new Error(`run_code failed: ${JSON.stringify(r.content)}`);
  return r.structuredContent ?? {};
}
