/**
 * Two sockets joined both ways (a CONNECT tunnel): each end's close passed on, bytes counted as
 * they pass, closed after the idle timeout or once the sandbox's byte limit is passed. From the
 * sandbox upstream the client's data is written on with backpressure; from upstream the socket's
 * reads come through an Inbound (the socket was dialed with it as its reader: large reads, handed
 * on without a copy), paused while the sandbox's side is full.
 */
import type { Socket } from 'node:net';
import type { Reader } from './upstream.js';

export type Direction = 'out' | 'in';

export interface SpliceOptions {
  idleTimeoutMs: number;
  /** Counts bytes as they pass; false once the sandbox's byte limit is passed (the splice then ends). */
  count: (direction: Direction, bytes: number) => boolean;
}

/** How a splice ended: both sides closed, or it was cut. */
export type SpliceEnd = 'closed' | 'idle' | 'limit' | 'error';

export interface SpliceResult {
  /** Bytes from the sandbox (the client) upstream. */
  bytesOut: number;
  /** Bytes from upstream to the sandbox. */
  bytesIn: number;
  end: SpliceEnd;
}

/** What an upstream socket reads: kept until a splice takes it, then handed straight on. */
export interface Inbound {
  readonly reader: Reader;
  /** From now on reads go to `sink` (what was kept first); false from it pauses the socket. */
  attach(sink: Reader): void;
}

export function createInbound(): Inbound {
  let sink: Reader | undefined;
  const kept: Buffer[] = [];
  return {
    reader: (chunk) => (sink ? sink(chunk) : (kept.push(chunk), true)),
    attach(to) {
      sink = to;
      for (const chunk of kept.splice(0)) to(chunk);
    },
  };
}

export function splice(
  client: Socket,
  upstream: { socket: Socket; inbound: Inbound },
  options: SpliceOptions,
): Promise<SpliceResult> {
  const up = upstream.socket;
  return new Promise((resolve) => {
    const result: SpliceResult = { bytesOut: 0, bytesIn: 0, end: 'closed' };
    const cut = (why: SpliceEnd): void => {
      if (result.end === 'closed') result.end = why;
      client.destroy();
      up.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      result.bytesOut += chunk.length;
      if (!options.count('out', chunk.length)) return cut('limit');
      if (!up.write(chunk)) client.pause();
    });
    up.on('drain', () => client.resume());
    client.on('end', () => up.end());
    client.on('drain', () => up.resume());
    upstream.inbound.attach((chunk) => {
      result.bytesIn += chunk.length;
      if (!options.count('in', chunk.length)) {
        cut('limit');
        return false;
      }
      return client.write(chunk);
    });
    up.on('end', () => client.end());
    for (const s of [client, up]) {
      s.setTimeout(options.idleTimeoutMs, () => cut('idle'));
      s.on('error', () => cut('error'));
    }
    let open = 2;
    const closed = (): void => {
      if (--open > 0) return;
      client.setTimeout(0);
      up.setTimeout(0);
      resolve(result);
    };
    for (const s of [client, up]) {
      // A side that went away while the other was being opened has closed already.
      if (s.closed) closed();
      else s.once('close', closed);
    }
    if (client.closed || up.closed) cut('error');
  });
}
