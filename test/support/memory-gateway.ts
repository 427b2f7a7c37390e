/**
 * The real HTTP app (REST, and the session WebSocket when asked) on loopback over the in-memory
 * session backend: for unit tests of the REST and WebSocket boundary and of its clients (the CLI).
 * Two tokens: `token` (the admin's) and `other` (a token named "other").
 */
import assert from 'node:assert/strict';
import { createAuthenticator } from '../../src/gateway/auth.js';
import { createHttpApp, type McpHttp } from '../../src/gateway/http/app.js';
import { execWebSocket } from '../../src/gateway/http/exec-ws.js';
import { listen, type Listening } from '../../src/gateway/http/listen.js';
import { LOCAL_PRINCIPAL } from '../../src/gateway/principal.js';
import { silentLogger } from '../../src/observability/logger.js';
import { memorySessions } from './memory-sessions.js';

export interface MemoryGatewayOptions {
  token: string;
  other: string;
  /** Host names the Host check accepts; undefined turns it off. */
  allowedHosts?: string[];
  /** Serve GET /sessions/:id/exec/ws too. */
  webSocket?: boolean;
  /** The /mcp routes (default: none is expected to be reached). */
  mcp?: McpHttp;
}

export type MemoryGateway = ReturnType<typeof memorySessions> & {
  app: ReturnType<typeof createHttpApp>;
  server: Listening;
  url: string;
  close(): Promise<void>;
};

const notUsed = () => assert.fail('no MCP in this test');

export async function serveMemoryGateway(options: MemoryGatewayOptions): Promise<MemoryGateway> {
  const made = memorySessions();
  const authenticator = createAuthenticator(
    { token: options.token, tokens: [{ name: 'other', token: options.other }] },
    LOCAL_PRINCIPAL,
  );
  const app = createHttpApp({
    service: made.service,
    metrics: made.metrics,
    logger: silentLogger(),
    authenticator,
    mcp: options.mcp ?? {
      post: notUsed,
      get: notUsed,
      delete: notUsed,
      close: () => Promise.resolve(),
      sessions: 0,
    },
    bodyLimitBytes: 1024 * 1024,
    limitNote: 'test',
    allowedHosts: options.allowedHosts,
    maxRequestsPerSecond: 1000,
    anonymousId: LOCAL_PRINCIPAL.id,
    version: '0.0.0-test',
  });
  const server = await listen(app, '127.0.0.1', 0);
  const sockets = options.webSocket
    ? execWebSocket({
        service: made.service,
        authenticator,
        metrics: made.metrics,
        logger: silentLogger(),
        allowedHosts: options.allowedHosts,
      })
    : undefined;
  if (sockets) server.server.on('upgrade', sockets.upgrade);
  return {
    ...made,
    app,
    server,
    url: server.url,
    close: async () => {
      sockets?.close();
      await server.close();
    },
  };
}
