/**
 * Stateful Streamable HTTP: one server and transport per session, keyed by `mcp-session-id` and
 * bound to the principal that opened it (another token gets 404, as for an unknown session). The
 * number of sessions is bounded, and idle ones are closed.
 *
 * A response stream that closes does not cancel its call (MCP 2025-11-25): the client resumes it
 * (Last-Event-ID, from the session's event store, or get_run) or cancels it
 * (notifications/cancelled, or deleting the session; an expired session cancels too).
 */
import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { McpHttp } from '../http/app.js';
import { jsonRpcError } from '../http/errors.js';
import { principalOfRequest, type ToolDeps } from './context.js';
import { BoundedEventStore, EVENT_STORE_LIMITS } from './event-store.js';
import type { ToolCatalog } from './catalog.js';
import { createMcpServer } from './server.js';

/** How soon a client whose stream closed reconnects (the SSE `retry` field). */
export const RETRY_MS = 1000;

export interface StatefulOptions {
  maxSessions: number;
  idleMs: number;
}

interface Session {
  server: McpServer;
  transport: StreamableHTTPServerTransport;
  principal: string;
  lastSeen: number;
  active: number;
}

export function statefulMcpHttp(deps: ToolDeps, catalog: ToolCatalog, options: StatefulOptions): McpHttp {
  const sessions = new Map<string, Session>();
  const principalOf = (req: Request): string => principalOfRequest(req, deps).id;

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const s of sessions.values())
        if (s.active === 0 && now - s.lastSeen > options.idleMs) void s.server.close();
    },
    Math.min(options.idleMs, 60_000),
  );
  sweep.unref();

  const find = (req: Request, res: Response): Session | undefined => {
    const session = sessions.get(req.header('mcp-session-id') ?? '');
    if (session && session.principal === principalOf(req)) return session;
    res.status(404).json(jsonRpcError(-32001, 'Session not found: initialize a new session'));
    return undefined;
  };
  const handle = async (s: Session, req: Request, res: Response, body?: unknown): Promise<void> => {
    s.active++;
    s.lastSeen = Date.now();
    try {
      await s.transport.handleRequest(req, res, body);
    } finally {
      s.active--;
      s.lastSeen = Date.now();
    }
  };
  const open = async (req: Request, res: Response): Promise<void> => {
    if (sessions.size >= options.maxSessions) {
      res
        .status(503)
        .json(
          jsonRpcError(-32000, `busy, retry later: ${sessions.size} sessions are open, the server's limit`),
        );
      return;
    }
    const server = createMcpServer(deps, catalog);
    const session: Session = {
      server,
      transport: undefined as never,
      principal: principalOf(req),
      lastSeen: Date.now(),
      active: 0,
    };
    session.transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, session),
      // Event ids and a retry field on every stream (SEP-1699): a client whose stream was cut
      // resumes with Last-Event-ID; the run goes on meanwhile.
      eventStore: new BoundedEventStore({
        ...EVENT_STORE_LIMITS,
        deadlineMs: deps.service.policy.ceilings.timeoutSeconds * 1000,
      }),
      retryInterval: RETRY_MS,
    });
    session.transport.onclose = () => {
      if (session.transport.sessionId) sessions.delete(session.transport.sessionId);
    };
    await server.connect(session.transport);
    await handle(session, req, res, req.body);
  };

  return {
    async post(req: Request, res: Response) {
      if (req.header('mcp-session-id')) {
        const s = find(req, res);
        if (s) await handle(s, req, res, req.body);
      } else if (isInitializeRequest(req.body)) {
        await open(req, res);
      } else {
        res.status(400).json(jsonRpcError(-32000, 'Bad Request: no mcp-session-id; send initialize first'));
      }
    },
    async get(req: Request, res: Response) {
      const s = find(req, res);
      if (s) await handle(s, req, res);
    },
    async delete(req: Request, res: Response) {
      const s = find(req, res);
      if (s) await handle(s, req, res);
    },
    async close() {
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map((s) => s.server.close().catch(() => undefined)));
    },
    get sessions() {
      return sessions.size;
    },
  };
}
