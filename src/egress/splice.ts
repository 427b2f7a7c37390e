/**
 * Two sockets joined both ways (a CONNECT tunnel): piped with backpressure, each end's close
 * passed on, bytes counted as they pass, closed after the idle timeout or once the sandbox's byte
 * limit is passed.
 */
import type { Socket } from 'node:net';

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

export function splice(client: Socket, upstream: Socket, options: SpliceOptions): Promise<SpliceResult> {
  return new Promise((resolve) => {
    const result: SpliceResult = { bytesOut: 0, bytesIn: 0, end: 'closed' };
    const cut = (why: SpliceEnd): void => {
      if (result.end === 'closed') result.end = why;
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      result.bytesOut += chunk.length;
      if (!options.count('out', chunk.length)) cut('limit');
    });
    upstream.on('data', (chunk: Buffer) => {
      result.bytesIn += chunk.length;
      if (!options.count('in', chunk.length)) cut('limit');
    });
    for (const s of [client, upstream]) {
      s.setTimeout(options.idleTimeoutMs, () => cut('idle'));
      s.on('error', () => cut('error'));
    }
    let open = 2;
    const closed = (): void => {
      if (--open > 0) return;
      client.setTimeout(0);
      upstream.setTimeout(0);
      resolve(result);
    };
    for (const s of [client, upstream]) {
      // A side that went away while the other was being opened has closed already.
      if (s.closed) closed();
      else s.once('close', closed);
    }
    if (client.closed || upstream.closed) return cut('error');
    client.pipe(upstream);
    upstream.pipe(client);
  });
}
