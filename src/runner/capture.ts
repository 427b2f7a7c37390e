/**
 * What a run's output becomes for a caller (an LLM, mostly): head and tail kept, byte counts exact,
 * binary output described instead of dumped. Memory held per stream is bounded by the window.
 */
import type { CapturedStream } from '../api/result.js';
import type { OutputWindow } from './protocol.js';

export type StreamName = 'stdout' | 'stderr';

export interface OutputChunk {
  stream: StreamName;
  data: Buffer;
}

/** Collects one stream: keeps at most `headBytes` live bytes and the `tailBytes` the runner reports at the end. */
export class StreamCapture {
  private readonly head = new Pieces();
  private readonly tail = new Pieces();
  private seen = 0;
  private readonly window: OutputWindow;

  constructor(window: OutputWindow) {
    this.window = window;
  }

  /** Adds live bytes; returns the part that fits in the head (what may be shown live). */
  add(data: Buffer): Buffer {
    this.seen += data.length;
    const room = Math.max(0, this.window.headBytes - this.head.size);
    const kept = data.length <= room ? data : data.subarray(0, room);
    this.head.push(kept);
    if (kept.length < data.length) this.addTail(data.subarray(kept.length));
    return kept;
  }

  /** The next piece of the bytes the runner kept from the end of the stream (it sends them in order). */
  addTail(data: Buffer): void {
    this.tail.push(data);
    this.tail.keepLast(this.window.tailBytes);
  }

  /** `total` is the runner's count of everything written, when known. */
  finish(total?: number): CapturedStream {
    const head = this.head.joined();
    const kept = this.tail.joined();
    const tail = kept.subarray(Math.max(0, kept.length - this.window.tailBytes));
    const bytes = Math.max(total ?? 0, this.seen, head.length + tail.length);
    const truncated = bytes > head.length + tail.length;
    if (looksBinary(head) || looksBinary(tail)) {
      return { text: `[binary output: ${bytes} bytes, not shown]`, bytes, truncated, binary: true };
    }
    const text = truncated
      ? `${decode(head)}\n[… ${bytes - head.length - tail.length} bytes truncated …]\n${decode(tail)}`
      : decode(Buffer.concat([head, tail]));
    return { text, bytes, truncated, binary: false };
  }
}

/** Bytes kept as copied pieces, joined once at the end: adding costs what is added, never what is held. */
class Pieces {
  private parts: Buffer[] = [];
  size = 0;

  push(data: Buffer): void {
    if (data.length === 0) return;
    this.parts.push(Buffer.from(data)); // a copy: a slice would keep the whole chunk it came from
    this.size += data.length;
  }

  /** Drops whole pieces from the front while the rest still holds at least `bytes`. */
  keepLast(bytes: number): void {
    while (this.parts.length > 0 && this.size - this.parts[0]!.length >= bytes) {
      this.size -= this.parts.shift()!.length;
    }
  }

  joined(): Buffer {
    return Buffer.concat(this.parts);
  }
}

const decoder = new TextDecoder('utf-8', { fatal: false });
const strict = new TextDecoder('utf-8', { fatal: true });

function decode(b: Buffer): string {
  return decoder.decode(b);
}

/** NUL bytes, invalid UTF-8 (ignoring a sequence cut at either end) or many control characters. */
export function looksBinary(b: Buffer): boolean {
  if (b.length === 0) return false;
  if (b.includes(0)) return true;
  try {
    strict.decode(trimPartialUtf8(b));
  } catch {
    return true;
  }
  let control = 0;
  for (const byte of b) {
    if (byte < 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d && byte !== 0x1b && byte !== 0x0c)
      control++;
  }
  return control > b.length / 100;
}

function trimPartialUtf8(b: Buffer): Buffer {
  let start = 0;
  while (start < Math.min(3, b.length) && (b[start]! & 0xc0) === 0x80) start++;
  let end = b.length;
  for (let i = 1; i <= Math.min(3, b.length); i++) {
    const byte = b[b.length - i]!;
    if ((byte & 0xc0) === 0xc0) {
      const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
      if (need > i) end = b.length - i;
      break;
    }
    if ((byte & 0x80) === 0) break;
  }
  return b.subarray(start, end);
}
