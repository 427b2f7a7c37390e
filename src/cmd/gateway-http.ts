/**
 * The gateway's HTTP side over a wired service, as `sandpit serve` composes it: MCP over
 * Streamable HTTP, the REST API, the session WebSocket, and the Host, Origin, auth and body-size
 * rules in front of them, listening with the configured slow-client timeouts.
 */
import type { Config } from '../config/schema.js';
import type { Authenticator } from '../gateway/auth.js';
import type { McpHttp } from '../gateway/http/app.js';
import { bodyLimitFor, createHttpApp } from '../gateway/http/app.js';
import { execWebSocket } from '../gateway/http/exec-ws.js';
import { isLoopback, LOOPBACK_HOSTS } from '../gateway/http/host-validation.js';
import { listen } from '../gateway/http/listen.js';
import { createMcpHttp } from '../gateway/mcp/http.js';
import { LOCAL_PRINCIPAL } from '../gateway/principal.js';
import type { SandpitService } from '../gateway/service.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { formatSize } from '../shared/quantity.js';

export interface GatewayHttpParts {
  config: Config;
  logger: Logger;
  service: SandpitService;
  metrics: Metrics;
  authenticator: Authenticator;
  version: string;
}

export interface GatewayHttp {
  /** Base URL, e.g. http://127.0.0.1:8080 (MCP at /mcp). */
  url: string;
  mcp: McpHttp;
  /** Closes the MCP sessions (cancelling their calls), the WebSockets and the listener; not the service. */
  close(): Promise<void>;
}

export async function serveGatewayHttp(
  parts: GatewayHttpParts,
  at: { host: string; port: number; stateless: boolean },
): Promise<GatewayHttp> {
  const { config, logger, service, metrics, authenticator, version } = parts;
  const allowedHosts = config.server.allowedHosts ?? (isLoopback(at.host) ? LOOPBACK_HOSTS : undefined);
  if (!allowedHosts)
    logger.warn({ host: at.host }, 'server.allowedHosts is not set: the Host header is not checked');
  const { maxSessions, maxSessionsPerPrincipal, sessionIdleSeconds, unusedSessionSeconds } = config.server;
  const mcp = createMcpHttp(
    { service, logger, metrics, defaultPrincipal: LOCAL_PRINCIPAL, version },
    {
      stateless: at.stateless,
      seedTools: config.server.seedTools,
      maxSessions,
      maxSessionsPerPrincipal,
      idleMs: sessionIdleSeconds * 1000,
      unusedMs: unusedSessionSeconds * 1000,
    },
  );
  const maxRequestBytes = config.sandbox.maxRequestBytes;
  const app = createHttpApp({
    service,
    metrics,
    logger,
    authenticator,
    mcp,
    bodyLimitBytes: bodyLimitFor(maxRequestBytes),
    limitNote: `the policy allows ${formatSize(maxRequestBytes)} of code, files and stdin in all (sandbox.maxRequestBytes)`,
    allowedHosts,
    maxRequestsPerSecond: config.server.maxRequestsPerSecond,
    anonymousId: LOCAL_PRINCIPAL.id,
    version,
  });
  const server = await listen(app, at.host, at.port, {
    headersMs: config.server.headersTimeoutSeconds * 1000,
    requestMs: config.server.requestTimeoutSeconds * 1000,
  });
  const sessionSockets = execWebSocket({ service, authenticator, metrics, logger, allowedHosts });
  server.server.on('upgrade', sessionSockets.upgrade);
  return {
    url: server.url,
    mcp,
    async close() {
      await mcp.close();
      sessionSockets.close();
      await server.close();
    },
  };
}
