/**
 * Plain-HTTP forwarding: a request in absolute form (`GET http://host:port/path`) is checked like a
 * CONNECT to its URL's host and port, then sent over the one socket the proxy dialed for it, with
 * the Host header set to what was checked and the hop-by-hop headers (the proxy's credential among
 * them) left behind. Each request gets its own upstream connection; none is reused.
 */
import { request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { targetOf, type Target } from './decide.js';

/** Headers that belong to one hop (RFC 9110 §7.6.1), plus the proxy's own. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
]);

export interface AbsoluteRequest {
  target: Target;
  /** `host[:port]` as the URL gives it: the Host header sent upstream. */
  authority: string;
  path: string;
}

/** The request's URL, when it is an absolute http:// URL naming a valid host; else why not. */
export function parseAbsolute(url: string | undefined): AbsoluteRequest | string {
  if (!url || url.startsWith('/'))
    return 'this is an egress proxy: send CONNECT host:port, or a request with an absolute http:// URL';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'the request URL is not a valid absolute URL';
  }
  if (parsed.protocol !== 'http:')
    return `only http:// URLs are forwarded (use CONNECT for ${parsed.protocol.replace(/:$/, '')})`;
  if (parsed.username || parsed.password) return 'a URL with credentials in it is not forwarded';
  const bracketed = parsed.hostname.startsWith('[');
  const host = bracketed ? parsed.hostname.slice(1, -1) : parsed.hostname;
  const target = targetOf(host, parsed.port ? Number(parsed.port) : 80, bracketed);
  if (!target) return `"${parsed.hostname}" is not a host name or an IP address`;
  return { target, authority: parsed.host, path: `${parsed.pathname}${parsed.search}` };
}

/** Whether a Host header names the same host and port as the authority (case and default port aside). */
export function sameAuthority(header: string, authority: string, defaultPort: number): boolean {
  const norm = (a: string): string => {
    const lower = a
      .trim()
      .toLowerCase()
      .replace(/\.(?=:|$)/, '');
    return /:\d+$/.test(lower) && !lower.endsWith(']') ? lower : `${lower}:${defaultPort}`;
  };
  return norm(header) === norm(authority);
}

function withoutHopByHop(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const listed = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase()),
  );
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name)) continue;
    out[name] = value;
  }
  return out;
}

export interface RelayOptions {
  idleTimeoutMs: number;
  /** Called as bytes pass the upstream socket; false once the sandbox's byte limit is passed. */
  meter: () => boolean;
}

/** How a relay ended: the response went out whole, or it was cut (and why). */
export interface RelayResult {
  error?: string;
}

/**
 * Sends `req` over `socket` and the response back on `res`. Resolves once the exchange is over
 * (the upstream socket is then destroyed); bytes are read off the socket by the caller's meter.
 */
export function relay(
  {
    req,
    res,
    socket,
    to,
  }: { req: IncomingMessage; res: ServerResponse; socket: Socket; to: AbsoluteRequest },
  options: RelayOptions,
): Promise<RelayResult> {
  return new Promise((resolve) => {
    let error: string | undefined;
    const cut = (why: string): void => {
      error ??= why;
      socket.destroy();
      if (!res.headersSent)
        res.writeHead(502, { 'content-type': 'text/plain' }).end(`sandpit egress proxy: ${why}\n`);
      else res.destroy();
    };
    const meter = (): void => {
      if (!options.meter()) cut('the byte limit was reached');
    };
    socket.on('data', meter);
    req.on('data', meter);
    socket.setTimeout(options.idleTimeoutMs, () => cut('idle timeout'));
    const upstream = request({
      method: req.method,
      path: to.path,
      headers: { ...withoutHopByHop(req.headers), host: to.authority },
      setHost: false,
      createConnection: () => socket,
    });
    upstream.on('error', (e: NodeJS.ErrnoException) => cut(`upstream: ${e.code ?? e.message}`));
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, withoutHopByHop(answer.headers));
      answer.pipe(res);
      answer.on('error', () => cut('upstream closed mid-response'));
    });
    req.pipe(upstream);
    const done = (): void => {
      meter();
      socket.setTimeout(0);
      socket.destroy();
      resolve(error === undefined ? {} : { error });
    };
    res.once('close', done);
  });
}
