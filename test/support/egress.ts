/**
 * Egress test helpers that keep every packet on loopback: a resolver that maps test names
 * (`*.sandpit.test`) to the addresses a test chooses, a dialer that fails the test on any address
 * outside 127.0.0.0/8 and ::1 (so a policy bug cannot send traffic off the machine), loopback
 * upstream servers, and a client that speaks CONNECT to a proxy.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { cidr, cidrContains, formatIp, parseIp, type IpAddress } from '../../src/shared/ip.js';
import { systemDialer, type Dialer, type Resolver } from '../../src/egress/upstream.js';

const LOOPBACK = [cidr('127.0.0.0/8'), cidr('::1/128')];

export const isLoopback = (ip: IpAddress): boolean => LOOPBACK.some((c) => cidrContains(c, ip));

/** The one dialer tests give the proxy: loopback only; anything else fails the test before a packet exists. */
export function loopbackDialer(dialed: string[] = []): Dialer {
  return (address, port, reader) => {
    const text = `${formatIp(address)}:${port}`;
    if (!isLoopback(address)) {
      const failure = new assert.AssertionError({ message: `the proxy tried to dial ${text}, off loopback` });
      process.nextTick(() => {
        throw failure;
      });
      throw failure;
    }
    dialed.push(text);
    return systemDialer(address, port, reader);
  };
}

/** A resolver for test names only: each maps to the addresses given; any other name does not exist. */
export function testResolver(names: Record<string, string[]>, calls: string[] = []): Resolver {
  return (host) => {
    calls.push(host);
    const found = names[host];
    if (!found)
      return Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }));
    return Promise.resolve(found.map((a) => parseIp(a)!));
  };
}

/** A TCP echo server on 127.0.0.1 (the upstream of CONNECT tests). */
export async function echoServer(host = '127.0.0.1'): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.pipe(s);
  });
  server.listen(0, host);
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** An HTTP server on 127.0.0.1 that answers every request with what it saw (method, url, headers). */
export async function reflectingServer(): Promise<{ port: number; seen: IncomingMessage[]; server: Server }> {
  const seen: IncomingMessage[] = [];
  const server = createHttpServer((req, res) => {
    seen.push(req);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          method: req.method,
          url: req.url,
          headers: req.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as AddressInfo).port, seen, server };
}

export interface ConnectReply {
  status: number;
  /** The status line's reason phrase. */
  reason: string;
  headers: string;
  body: string;
  /** The tunnel, when the status was 200. */
  socket: Socket;
}

/** Sends `CONNECT authority` (with `headers`) to a proxy listening at `where` and reads its reply. */
export async function connectThrough(
  where: { port: number } | { path: string },
  authority: string,
  headers: Record<string, string> = { host: authority },
): Promise<ConnectReply> {
  const socket = connect(where);
  await once(socket, 'connect');
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
  socket.write(`CONNECT ${authority} HTTP/1.1\r\n${lines.join('')}\r\n`);
  let buffered = Buffer.alloc(0);
  for (;;) {
    const end = buffered.indexOf('\r\n\r\n');
    if (end >= 0) {
      const head = buffered.subarray(0, end).toString('latin1');
      const [statusLine, ...rest] = head.split('\r\n');
      const m = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(statusLine!);
      assert.ok(m, `not an HTTP status line: ${statusLine}`);
      const status = Number(m[1]);
      let body = buffered.subarray(end + 4).toString();
      if (status !== 200) {
        socket.setEncoding('utf8');
        for await (const c of socket) body += c as string;
      } else if (buffered.length > end + 4) socket.unshift(buffered.subarray(end + 4));
      return { status, reason: m[2]!, headers: rest.join('\n'), body, socket };
    }
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    buffered = Buffer.concat([buffered, chunk]);
  }
}

/** Writes `text` into a tunnel and reads as many bytes back (through an echo server). */
export async function echo(socket: Socket, text: string): Promise<string> {
  socket.write(text);
  let got = '';
  while (got.length < text.length) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    got += chunk.toString();
  }
  return got;
}
