/** A test client of a session's exec WebSocket (GET /sessions/:id/exec/ws, subprotocol sandpit.exec.v1). */
import WebSocket from 'ws';
import { Channel, EXEC_WS_PROTOCOL } from '../../src/gateway/http/exec-ws.js';

/** One exec over the socket: what it printed so far, waits for text, and its exit. */
export class Terminal {
  readonly ws: WebSocket;
  output = '';
  readonly streams = new Set<number>();
  exit: Record<string, unknown> | undefined;
  readonly closed: Promise<number>;
  private waiters: (() => void)[] = [];

  constructor(baseUrl: string, id: string, headers: Record<string, string>, query = '') {
    const url = `${baseUrl.replace('http', 'ws')}/sessions/${id}/exec/ws${query}`;
    this.ws = new WebSocket(url, [EXEC_WS_PROTOCOL], { headers });
    this.ws.on('message', (data: Buffer) => {
      if (data[0] === Channel.exit) {
        this.exit = JSON.parse(data.subarray(1).toString()) as Record<string, unknown>;
      } else {
        this.streams.add(data[0] ?? -1);
        this.output += data.subarray(1).toString();
      }
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.closed = new Promise((resolve) => this.ws.on('close', (code) => resolve(code)));
  }

  opened(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => reject(Object.assign(new Error(body), { status: res.statusCode })));
      });
      this.ws.once('error', () => undefined);
    });
  }

  start(request: object): void {
    this.ws.send(JSON.stringify(request));
  }

  send(channel: number, data = ''): void {
    this.ws.send(Buffer.concat([Buffer.of(channel), Buffer.from(data)]));
  }

  /** Resolves once the output matches; the test's own timeout bounds the wait. */
  async waitFor(pattern: RegExp): Promise<RegExpMatchArray> {
    for (;;) {
      const match = pattern.exec(this.output);
      if (match) return match;
      await new Promise<void>((wake) => this.waiters.push(wake));
    }
  }
}
