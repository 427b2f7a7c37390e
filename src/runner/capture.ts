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
  private head: Buffer[] = [];
  private headSize = 0;
  private tail: Buffer = Buffer.alloc(0);
  private seen = 0;
  private readonly window: OutputWindow;

  constructor(window: OutputWindow) {
    this.window = window;
  }

  /** Adds live bytes; returns the part that fits in the head (what may be shown live). */
  add(data: Buffer): Buffer {
    this.seen += data.length;
    const room = Math.max(0, this.window.headBytes - this.headSize);
    const kept = data.length <= room ? data : data.subarray(0, room);
    if (kept.length > 0) {
      this.head.push(kept);
      this.headSize += kept.length;
    }
    if (kept.length < data.length) this.keepTail(data.subarray(kept.length));
    return kept;
  }

  /** The bytes the runner kept from the end of the stream. */
  setTail(data: Buffer): void {
    this.tail =
      data.length > this.window.tailBytes ? data.subarray(data.length - this.window.tailBytes) : data;
  }

  /** `total` is the runner's count of everything written, when known. */
  finish(total?: number): CapturedStream {
    const head = Buffer.concat(this.head);
    const bytes = Math.max(total ?? 0, this.seen, head.length + this.tail.length);
    const truncated = bytes > head.length + this.tail.length;
    if (looksBinary(head) || looksBinary(this.tail)) {
      return { text: `[binary output: ${bytes} bytes, not shown]`, bytes, truncated, binary: true };
    }
    const text = truncated
      ? `${decode(head)}\n[… ${bytes - head.length - this.tail.length} bytes truncated …]\n${decode(this.tail)}`
      : decode(Buffer.concat([head, this.tail]));
    return { text, bytes, truncated, binary: false };
  }

  private keepTail(data: Buffer): void {
    const joined = Buffer.concat([this.tail, data]);
    this.tail =
      joined.length > this.window.tailBytes ? joined.subarray(joined.length - this.window.tailBytes) : joined;
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
