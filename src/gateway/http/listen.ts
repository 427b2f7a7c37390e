/** Starts an HTTP server and gives back its URL and a close that also drops idle and streaming connections. */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  server: Server;
  /** Base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  close(): Promise<void>;
}

/**
 * By default a client gets this long to send its headers, and this long for the whole request (not
 * the response): then it is answered 408 and closed (server.headersTimeoutSeconds,
 * server.requestTimeoutSeconds).
 */
export const HEADERS_TIMEOUT_MS = 10_000;
export const REQUEST_TIMEOUT_MS = 30_000;

export interface Timeouts {
  headersMs: number;
  requestMs: number;
}

export function listen(
  handler: RequestListener,
  host: string,
  port: number,
  timeouts: Timeouts = { headersMs: HEADERS_TIMEOUT_MS, requestMs: REQUEST_TIMEOUT_MS },
): Promise<Listening> {
  const server = createServer(
    {
      headersTimeout: timeouts.headersMs,
      requestTimeout: timeouts.requestMs,
      // How often they are checked: a tenth of the shorter, between 250 ms and 1 s.
      connectionsCheckingInterval: Math.min(1000, Math.max(250, timeouts.headersMs / 10)),
    },
    handler,
  );
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address() as AddressInfo;
      const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      resolve({
        server,
        url: `http://${shown}:${address.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
