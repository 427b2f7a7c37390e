/**
 * Stateful Streamable HTTP: one server and transport per session, keyed by `mcp-session-id` and
 * bound to the principal that opened it (another token gets 404, as for an unknown session).
 * Sessions are bounded in all and per principal (without tokens: per client address); a principal
 * at its bound loses its own least recently used idle session, never anyone else's. Idle sessions
 * are closed, and one that never made a call soon.
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
import type { ToolCatalog } from './catalog.js';
import { principalOfRequest, type ToolDeps } from './context.js';
import { BoundedEventStore, EVENT_STORE_LIMITS } from './event-store.js';
import { createMcpServer } from './server.js';
import type { TaskIndex } from './tasks.js';

/** How soon a client whose stream closed reconnects (the SSE `retry` field). */
export const RETRY_MS = 1000;

export interface StatefulOptions {
  maxSessions: number;
  maxSessionsPerPrincipal: number;
  /** A session with no request for this long is closed. */
  idleMs: number;
  /** A session that made no call since initialize is closed after this long. */
  unusedMs: number;
}

export const DEFAULT_STATEFUL: StatefulOptions = {
  maxSessions: 256,
  maxSessionsPerPrincipal: 64,
  idleMs: 30 * 60_000,
  unusedMs: 60_000,
};

interface Session {
  server: McpServer;
  transport: StreamableHTTPServerTransport;
  /** Whose it is: the principal's id, or for the local principal its client's address. */
  owner: string;
  openedAt: number;
  /** When its last request came in or ended. */
  lastSeen: number;
  /** Calls (POST, DELETE) in progress; its standalone SSE stream (GET) does not keep it busy. */
  active: number;
  /** Whether a request other than initialize and notifications came in. */
  used: boolean;
}

/** Requests that do not count as use: the handshake and notifications. */
function isCall(body: unknown): boolean {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  return messages.some((m) => {
    const method = (m as { method?: unknown } | null)?.method;
    return typeof method === 'string' && method !== 'initialize' && !method.startsWith('notifications/');
  });
}

export function statefulMcpHttp(
  deps: ToolDeps,
  catalog: ToolCatalog,
  tasks: TaskIndex,
  options: StatefulOptions,
): McpHttp {
  const sessions = new Map<string, Session>();
  const ownerOf = (req: Request): string => {
    const principal = principalOfRequest(req, deps);
    // Without tokens every client is the local principal: each address gets its own bound.
    return principal.id === deps.defaultPrincipal.id
      ? `${principal.id}@${req.socket.remoteAddress ?? '?'}`
      : principal.id;
  };
  const end = (id: string, s: Session): void => {
    sessions.delete(id);
    void s.server.close().catch(() => undefined);
  };

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, s] of sessions) {
        if (s.active > 0) continue;
        if (now - s.lastSeen > options.idleMs || (!s.used && now - s.openedAt > options.unusedMs)) end(id, s);
      }
    },
    Math.max(250, Math.min(options.idleMs, options.unusedMs, 60_000) / 2),
  );
  sweep.unref();

  const find = (req: Request, res: Response): Session | undefined => {
    const session = sessions.get(req.header('mcp-session-id') ?? '');
    if (session && session.owner === ownerOf(req)) return session;
    res.status(404).json(jsonRpcError(-32001, 'Session not found: initialize a new session'));
    return undefined;
  };
  const handle = async (s: Session, req: Request, res: Response, body?: unknown): Promise<void> => {
    const call = req.method !== 'GET';
    if (call) s.active++;
    s.lastSeen = Date.now();
    if (isCall(body)) s.used = true;
    try {
      await s.transport.handleRequest(req, res, body);
    } finally {
      if (call) s.active--;
      s.lastSeen = Date.now();
    }
  };
  /** Room for one more session of `owner`: its own LRU idle session goes if it is at its bound. */
  const makeRoom = (owner: string): string | undefined => {
    const own = [...sessions].filter(([, s]) => s.owner === owner);
    if (own.length >= options.maxSessionsPerPrincipal) {
      const idle = own.filter(([, s]) => s.active === 0).sort(([, a], [, b]) => a.lastSeen - b.lastSeen);
      const [oldest] = idle;
      if (!oldest) return `all ${own.length} sessions of this caller are busy, its limit`;
      end(...oldest);
    }
    if (sessions.size >= options.maxSessions) return `${sessions.size} sessions are open, the server's limit`;
    return undefined;
  };
  const open = async (req: Request, res: Response): Promise<void> => {
    const owner = ownerOf(req);
    const full = makeRoom(owner);
    if (full) {
      res.status(503).json(jsonRpcError(-32000, `busy, retry later: ${full}`));
      return;
    }
    const server = createMcpServer(deps, catalog, { principal: principalOfRequest(req, deps), index: tasks });
    const now = Date.now();
    const session: Session = {
      server,
      transport: undefined as never,
      owner,
      openedAt: now,
      lastSeen: now,
      active: 0,
      used: false,
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
      const id = session.transport.sessionId;
      if (id && sessions.get(id) === session) sessions.delete(id);
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
