/**
 * The session WebSocket, `GET /sessions/:id/exec/ws` (the ws package): one interactive exec per
 * socket. The first message is the exec, as JSON text (WsExecStartSchema). Every later message is
 * binary, its first byte a channel: the client sends 0 stdin, 4 a resize ({cols, rows}) and 255
 * the end of stdin; the server sends 1 stdout, 2 stderr (a tty's output is all on 1) and 3 the
 * exit (the ExecResult, or {error}), then closes: 1000 after an exec that ran, 4000 + the HTTP
 * status after an error. A client that goes away kills its exec.
 *
 * The upgrade passes the same Host check and bearer auth as the REST routes. The token comes in
 * the Authorization header, or as the subprotocol `bearer.<token>` (a browser cannot set
 * headers), never in the query string; a page of another origin is refused.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { Channel, EXEC_WS_PROTOCOL, frame } from '../../api/exec-ws.js';
import { WsExecStartSchema, WsResizeSchema } from '../../api/session.js';
import { parseInput } from '../../api/validate.js';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { AppError, toAppError } from '../../shared/errors.js';
import type { Authenticator } from '../auth.js';
import type { Principal } from '../principal.js';
import type { SandpitService } from '../service.js';
import type { ExecHandle } from '../session-execs.js';
import { allowedHostSet, hostRefusal, originRefusal } from './host-validation.js';

export { Channel, EXEC_WS_PROTOCOL };
export const EXEC_WS_ROUTE = '/sessions/:id/exec/ws';
const BEARER_PROTOCOL = 'bearer.';
const PATH = /^\/sessions\/([^/]+)\/exec\/ws$/;

/** Stdin messages written to the exec but not yet taken: past this many the socket stops reading. */
const STDIN_IN_FLIGHT = 8;
const HEARTBEAT_MS = 30_000;
/** Largest message a client may send: the exec request, or one piece of stdin. */
export const MAX_MESSAGE_BYTES = 1024 * 1024;

export interface ExecWsDeps {
  service: SandpitService;
  authenticator: Authenticator;
  metrics: Metrics;
  logger: Logger;
  /** Host names accepted in the Host header; undefined turns the check off. */
  allowedHosts: readonly string[] | undefined;
}

export interface ExecWebSocket {
  /** The HTTP server's `upgrade` listener. */
  upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** Ends every socket (their execs are killed). */
  close(): void;
}

export function execWebSocket(deps: ExecWsDeps): ExecWebSocket {
  const allowed = deps.allowedHosts ? allowedHostSet(deps.allowedHosts) : undefined;
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_MESSAGE_BYTES,
    handleProtocols: (protocols) => (protocols.has(EXEC_WS_PROTOCOL) ? EXEC_WS_PROTOCOL : false),
  });
  const count = (status: number): void =>
    deps.metrics.httpRequests.inc({ method: 'GET', route: EXEC_WS_ROUTE, status: String(status) });

  const heartbeat = setInterval(() => {
    for (const ws of wss.clients) {
      const alive = ws as WebSocket & { alive?: boolean };
      if (alive.alive === false) ws.terminate();
      else {
        alive.alive = false;
        ws.ping();
      }
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();

  const upgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const { sessionId, principal } = await admit(req, deps, allowed);
    wss.handleUpgrade(req, socket, head, (ws) => {
      count(101);
      const alive = ws as WebSocket & { alive?: boolean };
      ws.on('pong', () => (alive.alive = true));
      serveExec(ws, sessionId, principal, deps);
    });
  };

  return {
    upgrade: (req, socket, head) => {
      socket.on('error', () => socket.destroy());
      upgrade(req, socket, head).catch((e: unknown) => {
        const err = toAppError(e);
        count(err.httpStatus);
        refuse(
          socket,
          err,
          err.code === 'UNAUTHORIZED' || err.code === 'FORBIDDEN'
            ? deps.authenticator.challenge(req.headers.authorization, err)
            : undefined,
        );
      });
    },
    close() {
      clearInterval(heartbeat);
      for (const ws of wss.clients) ws.terminate();
      wss.close();
    },
  };
}

/** Who may open the socket, and for which session: refusals before the upgrade are plain HTTP. */
async function admit(
  req: IncomingMessage,
  deps: ExecWsDeps,
  allowed: ReadonlySet<string> | undefined,
): Promise<{ sessionId: string; principal: Principal }> {
  const url = new URL(req.url ?? '/', 'http://upgrade.invalid');
  const match = PATH.exec(url.pathname);
  if (!match)
    throw new AppError('NOT_FOUND', `no WebSocket at ${url.pathname}`, { hint: `open ${EXEC_WS_ROUTE}` });
  const refusal = allowed && hostRefusal(allowed, req.headers.host);
  if (refusal) throw refusal;
  const cross = originRefusal(req.headers.origin, req.headers.host);
  if (cross) throw cross;
  if (url.search !== '') {
    throw new AppError('INVALID_REQUEST', 'this WebSocket takes no query parameters', {
      violations: [{ field: 'query', message: 'a token in the URL ends up in logs: send no query string' }],
      hint: `send the token as "Authorization: Bearer <token>", or as the subprotocol ${BEARER_PROTOCOL}<token>`,
    });
  }
  const principal = await deps.authenticator.verify(req.headers.authorization ?? bearerProtocol(req));
  const sessionId = decodeURIComponent(match[1] ?? '');
  // A session another gateway replica made, or one that ended there, as every route does.
  await deps.service.sessions.serve(sessionId, principal);
  // Unknown, ended or another token's session: refused before the upgrade (another's is a 404).
  deps.service.sessions.assertLive(sessionId, principal);
  return { sessionId, principal };
}

/** `Sec-WebSocket-Protocol: bearer.<token>` as an Authorization header value. */
function bearerProtocol(req: IncomingMessage): string | undefined {
  const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
  const token = offered.find((p) => p.startsWith(BEARER_PROTOCOL))?.slice(BEARER_PROTOCOL.length);
  return token ? `Bearer ${token}` : undefined;
}

function refuse(socket: Duplex, err: AppError, wwwAuth: string | undefined): void {
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify({ error: err.toJSON() });
  const status = err.httpStatus;
  socket.end(
    [
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
      'Content-Type: application/json; charset=utf-8',
      `Content-Length: ${Buffer.byteLength(body)}`,
      ...(wwwAuth ? [`WWW-Authenticate: ${wwwAuth}`] : []),
      'Connection: close',
      '',
      body,
    ].join('\r\n'),
  );
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
}

/** One exec over an open socket. */
function serveExec(ws: WebSocket, sessionId: string, principal: Principal, deps: ExecWsDeps): void {
  const gone = new AbortController();
  let handle: ExecHandle | undefined;
  let stdinEnded = false;
  let stdin = Promise.resolve();
  let inFlight = 0;
  let done = false;

  const finish = (exit: unknown, code: number, reason: string): void => {
    if (done) return;
    done = true;
    if (ws.readyState === ws.OPEN) {
      ws.send(frame(Channel.exit, JSON.stringify(exit)));
      ws.close(code, reason);
    }
    // An exec still running after a client's error is killed: nothing is left half done.
    gone.abort(new Error(reason));
  };
  const fail = (e: unknown): void => {
    const err = toAppError(e);
    finish({ error: err.toJSON() }, 4000 + err.httpStatus, err.code);
  };
  const bad = (field: string, message: string): void =>
    fail(new AppError('INVALID_REQUEST', message, { violations: [{ field, message }] }));

  const start = (data: Buffer, isBinary: boolean): void => {
    if (isBinary) return bad('message', 'the first message is the exec request, as JSON text');
    let body: unknown;
    try {
      body = JSON.parse(data.toString('utf8'));
    } catch {
      return bad('message', 'the exec request is not valid JSON');
    }
    const { cols, rows, ...request } = parseInput(WsExecStartSchema, body, 'exec request');
    handle = deps.service.sessions.exec(sessionId, principal, request, {
      signal: gone.signal,
      streamStdin: true,
      terminal: request.tty ? { cols, rows } : undefined,
      onOutput: (chunk) => {
        if (chunk.data.length > 0 && ws.readyState === ws.OPEN)
          ws.send(frame(chunk.stream === 'stdout' ? Channel.stdout : Channel.stderr, chunk.data));
      },
    });
    handle.result.then((result) => finish(result, 1000, 'exited'), fail);
  };

  const writeStdin = (exec: ExecHandle, data: Buffer): void => {
    if (stdinEnded) return bad('channel', 'stdin was ended (channel 255): no more stdin');
    inFlight++;
    if (inFlight >= STDIN_IN_FLIGHT) ws.pause();
    stdin = stdin
      .then(() => exec.execution.writeStdin(data))
      .catch(() => undefined) // the exec has ended: its exit frame says how
      .finally(() => {
        inFlight--;
        if (inFlight < STDIN_IN_FLIGHT / 2 && ws.isPaused) ws.resume();
      });
  };

  const control = (exec: ExecHandle, data: Buffer, isBinary: boolean): void => {
    if (!isBinary || data.length === 0) {
      return bad('message', 'after the exec request every message is binary, its first byte a channel');
    }
    const channel = data[0] ?? -1;
    const payload = data.subarray(1);
    switch (channel) {
      case Channel.stdin:
        return writeStdin(exec, payload);
      case Channel.resize: {
        let size: unknown;
        try {
          size = JSON.parse(payload.toString('utf8'));
        } catch {
          return bad('resize', 'a resize (channel 4) is JSON: {"cols": N, "rows": N}');
        }
        const { cols, rows } = parseInput(WsResizeSchema, size, 'resize');
        return exec.execution.resize(cols, rows);
      }
      case Channel.stdinEnd:
        stdinEnded = true;
        stdin = stdin.then(() => exec.execution.endStdin());
        return;
      default:
        return bad(
          'channel',
          `unknown channel ${channel}: the client sends 0 stdin, 4 resize, 255 end of stdin`,
        );
    }
  };

  ws.on('message', (raw, isBinary) => {
    if (done) return;
    try {
      const data = toBuffer(raw);
      if (handle) control(handle, data, isBinary);
      else start(data, isBinary);
    } catch (e) {
      fail(e);
    }
  });
  ws.on('close', () => gone.abort(new Error('the client went away')));
  ws.on('error', (e) => {
    deps.logger.debug({ sessionId, err: e.message }, 'session WebSocket error');
    gone.abort(e);
  });
}
