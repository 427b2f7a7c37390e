/**
 * How the proxy says no, so that the program sees why: the status line's reason phrase carries the
 * rule (a CONNECT client such as Python's shows only the status line), a header names it for
 * tools, and the body says it in a sentence.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface Refusal {
  status: number;
  /** The rule that refused, e.g. `evil.com is not in this sandbox's allowlist`. */
  rule: string;
}

const TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  403: 'Forbidden',
  407: 'Proxy Authentication Required',
  429: 'Too Many Requests',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  504: 'Gateway Timeout',
};

/** Printable ASCII only: a reason phrase and a header value must not carry CR, LF or controls. */
const printable = (text: string): string => text.replace(/[^\x20-\x7e]/g, '?').slice(0, 400);

export function reasonPhrase(r: Refusal): string {
  return printable(`${TITLES[r.status] ?? 'Error'} (sandpit egress: ${r.rule})`);
}

function body(r: Refusal): string {
  return `sandpit egress proxy: ${printable(r.rule)}\n`;
}

/** A refusal written on a raw socket (a CONNECT's), which is then closed. */
export function refuseSocket(socket: Socket, r: Refusal): void {
  if (!socket.writable) return void socket.destroy();
  const text = body(r);
  socket.end(
    `HTTP/1.1 ${r.status} ${reasonPhrase(r)}\r\n` +
      'Content-Type: text/plain; charset=utf-8\r\n' +
      `X-Sandpit-Egress: ${printable(r.rule)}\r\n` +
      `Content-Length: ${Buffer.byteLength(text)}\r\n` +
      (r.status === 407 ? 'Proxy-Authenticate: Basic realm="sandpit-egress"\r\n' : '') +
      'Connection: close\r\n\r\n' +
      text,
  );
}

/** A refusal as the response to a plain-HTTP request. */
export function refuseResponse(res: ServerResponse, r: Refusal): void {
  if (res.headersSent) return void res.destroy();
  const text = body(r);
  res.writeHead(r.status, reasonPhrase(r), {
    'content-type': 'text/plain; charset=utf-8',
    'x-sandpit-egress': printable(r.rule),
    'content-length': Buffer.byteLength(text),
    ...(r.status === 407 ? { 'proxy-authenticate': 'Basic realm="sandpit-egress"' } : {}),
  });
  res.end(text);
}
