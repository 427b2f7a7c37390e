/**
 * The wire format of the runner's session mode (`sandpit-runner --session`; the spec is the
 * header comment of images/runner/session.c). Requests go to the runner's stdin as
 *   u8 type | u32be id | u32be len | body | "SPQE"
 * with a body of records (u8 tag | u32be len | bytes), or raw bytes for 'D'. Answers come back as
 * keyed records of at most PIPE_BUF bytes,
 *   key[16] | u8 type | u8 flags | u32be id | u16be len | data,
 * each written whole, so a program that writes into the runner's stdout (gVisor lets it) can
 * neither forge nor split one: without the key its bytes are skipped. The one exception is a bulk
 * read's 'd' records (protocol 4, up to 64 KiB): bytes written into the pipe may land inside one,
 * in place of file bytes that program could rewrite anyway, never in the framing. JSON messages
 * may span records (flags & MORE); every one is size-capped and schema-checked here, since the
 * sandbox is never trusted.
 */
import { randomBytes } from 'node:crypto';
import * as z from 'zod';
import { FILE_TYPES } from '../api/session.js';
import { ExitReportSchema } from './protocol.js';

/** The session protocol this code speaks; the runner announces its own in the ready frame. */
export const SESSION_PROTOCOL_VERSION = 7;
/** The first session runner whose open takes an egress proxy socket ('p'). */
export const EGRESS_SESSION_VERSION = 6;
/**
 * The first session runner whose open takes variables of its own environment for every exec ('v'):
 * a session with an allowlist on Kubernetes needs it (an older runner refuses the record).
 */
export const INHERIT_ENV_SESSION_VERSION = 7;
/** The oldest session-mode runner this code accepts. */
export const MIN_SESSION_PROTOCOL_VERSION = 3;

/**
 * The runner's first bytes in session mode: 'R', u32be 4, u32be its protocol version. A newline
 * follows (so that a pod's log shows the frame; the record decoder skips it).
 */
export const READY_FRAME_BYTES = 9;

/**
 * The protocol version a session runner's ready frame announces; undefined while `head` holds less
 * than a whole frame; -1 when it starts with anything else.
 */
export function readyFrameVersion(head: Buffer): number | undefined {
  if (head.length < READY_FRAME_BYTES) return undefined;
  if (head[0] !== 0x52 || head.readUInt32BE(1) !== 4) return -1;
  return head.readUInt32BE(5);
}

export const KEY_BYTES = 16;
const REC_MAX = 4096;
export const REC_HEAD = KEY_BYTES + 1 + 1 + 4 + 2;
/** The most data one record carries. */
export const REC_DATA = REC_MAX - REC_HEAD;
/** The most data a bulk read's 'd' record carries (protocol 4: BULK_REC_DATA in session.h). */
export const BULK_REC_DATA = 64 * 1024 - REC_HEAD;
/** The first protocol whose runner sends bulk 'd' records to a read that asks for them. */
export const BULK_READ_VERSION = 4;
/** The first protocol whose runner keeps a history of acknowledged execs ('I'), and says its lastExecId. */
export const HISTORY_VERSION = 5;
const MORE = 1;
/** The largest request body the runner takes. */
export const MAX_REQUEST = 2 * 1024 * 1024 + 64 * 1024;
/** Upload and stdin chunks: well under MAX_REQUEST. */
export const CHUNK_BYTES = 1024 * 1024;
/** Stdin bytes an exec may have in flight before the runner says it took them. */
export const STDIN_WINDOW = 1024 * 1024;
/** What the runner keeps of each stream of an exec whose report no gateway took (its RETAINED_TAIL). */
export const RETAINED_OUTPUT_BYTES = 64 * 1024;
/**
 * What the runner's exec history keeps of acknowledged execs in all, in the sandbox's own memory
 * (its HISTORY_BYTES): each one's argv and its last RETAINED_OUTPUT_BYTES of each stream. The
 * oldest go first; the newest always stays.
 */
export const HISTORY_BYTES = 1024 * 1024;
/**
 * Download bytes the runner may send ahead of what the reader took: more than the path between
 * them holds (its 1 MiB stdout pipe, the engine's buffers, the socket's), so that credit given
 * back in READ_CREDIT steps comes before the runner runs out.
 */
export const READ_WINDOW = 8 * 1024 * 1024;
/** The reader gives credit back once it took this much. */
export const READ_CREDIT = 1024 * 1024;
const TRAILER = Buffer.from('SPQE');
const RESYNC_MARKER = Buffer.from('SANDPIT-RESYNC-1');
const RESYNC_PAD = MAX_REQUEST + 64;

export function newKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

export type RequestType =
  | 'S' // open
  | 'X' // exec
  | 'D' // data for an exec's stdin or an upload
  | 'Z' // end of that data
  | 'K' // kill an exec
  | 'G' // resize a tty exec
  | 'Y' // ack an exec's exit report
  | 'W' // write a file
  | 'R' // read a file
  | 'C' // credit for a read
  | 'L' // list
  | 'U' // remove
  | 'M' // mkdir
  | 'N' // watch
  | 'V' // unwatch
  | 'P' // processes
  | 'I' // exec history
  | 'J' // lifetime
  | 'H' // ping
  | 'Q'; // close

export type Field = readonly [tag: string, data: Buffer];

const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};
const u64 = (n: number): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(n))));
  return b;
};

/** The record helpers request bodies are made of. */
export const field = {
  bytes: (tag: string, data: Buffer | string): Field => [
    tag,
    Buffer.isBuffer(data) ? data : Buffer.from(data),
  ],
  u32: (tag: string, n: number): Field => [tag, u32(n)],
  u64: (tag: string, n: number): Field => [tag, u64(n)],
  u64u32: (tag: string, a: number, b: number): Field => [tag, Buffer.concat([u64(a), u32(b)])],
  flag: (tag: string): Field => [tag, Buffer.alloc(0)],
  u16pair: (tag: string, a: number, b: number): Field => {
    const d = Buffer.alloc(4);
    d.writeUInt16BE(Math.min(65535, Math.max(0, a)), 0);
    d.writeUInt16BE(Math.min(65535, Math.max(0, b)), 2);
    return [tag, d];
  },
} as const;

export function encodeFields(fields: readonly Field[]): Buffer {
  const parts: Buffer[] = [];
  for (const [tag, data] of fields) {
    const hdr = Buffer.alloc(5);
    hdr.write(tag, 0, 'latin1');
    hdr.writeUInt32BE(data.length, 1);
    parts.push(hdr, data);
  }
  return Buffer.concat(parts);
}

/**
 * One request, as the parts to write in order (an upload's data goes on as it is, never copied
 * into a joined buffer): its body is records, or raw bytes for 'D'.
 */
export function encodeRequest(
  type: RequestType,
  id: number,
  body: Buffer | readonly Field[] = [],
): readonly Buffer[] {
  const data = Buffer.isBuffer(body) ? body : encodeFields(body);
  if (data.length > MAX_REQUEST)
    throw new RangeError(`a request of ${data.length} bytes is over ${MAX_REQUEST}`);
  const hdr = Buffer.alloc(9);
  hdr.write(type, 0, 'latin1');
  hdr.writeUInt32BE(id >>> 0, 1);
  hdr.writeUInt32BE(data.length, 5);
  return [hdr, data, TRAILER];
}

/**
 * What a new gateway writes first: zeros that complete a request its predecessor left
 * half-written (whose trailer then fails, so the runner discards it and hunts), the marker, a
 * nonce to know the answer by, and the key for everything the runner sends from then on.
 */
export function encodeResync(nonce: Buffer): Buffer {
  return Buffer.concat([Buffer.alloc(RESYNC_PAD), RESYNC_MARKER, nonce]);
}

export interface SessionRecord {
  type: string;
  more: boolean;
  id: number;
  data: Buffer;
}

const BULK_TYPE = 0x64; // 'd'
/** The most data a record of this type may carry: bulk read data, or what fits in PIPE_BUF. */
const dataCap = (type: number): number => (type === BULK_TYPE ? BULK_REC_DATA : REC_DATA);

/**
 * The keyed records in what the runner writes, linear in the bytes pushed: it skips (and counts)
 * every byte that is not part of one. Data comes out as views of the pushed chunks, never copied:
 * a record whole in one chunk as it is, and a 'd' record (a bulk read's, up to 64 KiB) split
 * across chunks as one record per piece, in order. Only a small record split across chunks is
 * joined. Whoever keeps a record's data long copies it.
 */
export class SessionRecordDecoder {
  private key: Buffer;
  skippedBytes = 0;
  /** The start of a record the last chunk ended inside, as views of the chunks it came in. */
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** The whole size of the held record, once its header is in. */
  private heldSize = 0;
  /** A 'd' record whose data goes on in the next chunks: its header, and the bytes still to come. */
  private streaming: { type: string; id: number; left: number } | undefined;
  /** What may be the start of a key at the end of the last chunk (fewer than KEY_BYTES bytes). */
  private keyStart: Buffer = Buffer.alloc(0);

  constructor(key: Buffer) {
    this.key = key;
  }

  /** From now on only records with this key count (after a resync). */
  rekey(key: Buffer): void {
    this.key = key;
  }

  push(chunk: Buffer): SessionRecord[] {
    const out: SessionRecord[] = [];
    let bytes = chunk;
    let off = 0;
    // Only after bytes that were not a record (rare): a key may begin in them.
    if (this.keyStart.length > 0) bytes = Buffer.concat([this.keyStart, chunk]);
    this.keyStart = Buffer.alloc(0);
    if (this.streaming) off = this.stream(bytes, 0, out);
    else if (this.heldBytes > 0) off = this.completeHeld(bytes, out);
    if (off < bytes.length) this.scan(bytes, off, out);
    return out;
  }

  /** Hands on what `buf` has of the streamed record from `off`; returns where the bytes after it start. */
  private stream(buf: Buffer, off: number, out: SessionRecord[]): number {
    const s = this.streaming!;
    const n = Math.min(s.left, buf.length - off);
    if (n > 0) out.push({ type: s.type, more: false, id: s.id, data: buf.subarray(off, off + n) });
    s.left -= n;
    if (s.left === 0) this.streaming = undefined;
    return off + n;
  }

  /** From now on the data of the 'd' record whose header starts at `at` goes on as it comes. */
  private startStream(header: Buffer, at: number): void {
    this.streaming = {
      type: 'd',
      id: header.readUInt32BE(at + KEY_BYTES + 2),
      left: header.readUInt16BE(at + REC_HEAD - 2),
    };
  }

  /** Feeds the held record; returns where in `chunk` the bytes after it start. */
  private completeHeld(chunk: Buffer, out: SessionRecord[]): number {
    if (this.heldSize === 0) {
      const need = REC_HEAD - this.heldBytes;
      if (chunk.length < need) return this.hold(chunk);
      const header = Buffer.concat([...this.held, chunk.subarray(0, need)]);
      this.heldSize = recordSize(header, 0);
      if (header[KEY_BYTES] === BULK_TYPE && this.heldSize > REC_HEAD) {
        this.held = [];
        this.heldBytes = this.heldSize = 0;
        this.startStream(header, 0);
        return this.stream(chunk, need, out);
      }
    }
    const need = this.heldSize - this.heldBytes;
    if (chunk.length < need) return this.hold(chunk);
    const whole = Buffer.concat([...this.held, chunk.subarray(0, need)], this.heldSize);
    this.held = [];
    this.heldBytes = this.heldSize = 0;
    out.push(recordAt(whole, 0));
    return need;
  }

  private hold(piece: Buffer): number {
    this.held.push(piece);
    this.heldBytes += piece.length;
    return piece.length;
  }

  /** Takes the records of `buf` from `off` on, and holds (or streams) the one it ends inside. */
  private scan(buf: Buffer, off: number, out: SessionRecord[]): void {
    while (off < buf.length) {
      const aligned =
        buf.length - off >= KEY_BYTES && buf.compare(this.key, 0, KEY_BYTES, off, off + KEY_BYTES) === 0;
      const at = aligned ? off : buf.indexOf(this.key, off);
      if (at < 0) {
        const keep = Math.max(off, buf.length - (KEY_BYTES - 1));
        this.skippedBytes += keep - off;
        this.keyStart = Buffer.from(buf.subarray(keep));
        return;
      }
      this.skippedBytes += at - off;
      if (buf.length - at < REC_HEAD) return void this.hold(buf.subarray(at));
      const size = recordSize(buf, at);
      if (buf.length - at >= size) {
        out.push(recordAt(buf, at));
        off = at + size;
      } else if (buf[at + KEY_BYTES] === BULK_TYPE) {
        this.startStream(buf, at);
        return void this.stream(buf, at + REC_HEAD, out);
      } else {
        this.heldSize = size;
        return void this.hold(buf.subarray(at));
      }
    }
  }
}

/** The size of the record whose header starts at `at`; throws when its length is over its type's cap. */
function recordSize(buf: Buffer, at: number): number {
  const len = buf.readUInt16BE(at + REC_HEAD - 2);
  if (len > dataCap(buf[at + KEY_BYTES]!)) throw new Error(`a runner record of ${len} bytes is too large`);
  return REC_HEAD + len;
}

function recordAt(buf: Buffer, at: number): SessionRecord {
  return {
    type: String.fromCharCode(buf[at + KEY_BYTES]!),
    more: (buf[at + KEY_BYTES + 1]! & MORE) !== 0,
    id: buf.readUInt32BE(at + KEY_BYTES + 2),
    data: buf.subarray(at + REC_HEAD, at + REC_HEAD + buf.readUInt16BE(at + REC_HEAD - 2)),
  };
}

/** Record types whose data is a JSON message, and the most bytes each may take. */
const MESSAGE_CAPS: Record<string, number> = {
  A: 64 * 1024, // done
  F: 16 * 1024, // failed
  B: 1024, // exec begun
  X: 4096, // exit report
  c: 1024, // stdin consumed
  H: 16 * 1024, // file entry before its data
  l: 256 * 1024, // list entries
  w: 16 * 1024, // watch event
  Y: 1024 * 1024, // resync
  h: 32 * 1024, // one exec of the history
  Z: 1024, // session end
};
/** Record types whose data is raw bytes. */
const DATA_TYPES = new Set(['O', 'E', 'T', 'd']);

export type RunnerMessage =
  | { kind: 'data'; type: 'O' | 'E' | 'T' | 'd'; id: number; data: Buffer }
  | { kind: 'json'; type: string; id: number; value: unknown };

/** Joins records into messages: raw data as it comes, JSON once whole. Throws on anything malformed. */
export class MessageAssembler {
  private partial: { type: string; id: number; parts: Buffer[]; size: number } | undefined;

  add(r: SessionRecord): RunnerMessage | undefined {
    if (DATA_TYPES.has(r.type)) {
      if (r.more || this.partial) throw new Error(`a ${r.type} record inside a message`);
      return { kind: 'data', type: r.type as 'O' | 'E' | 'T' | 'd', id: r.id, data: r.data };
    }
    const cap = MESSAGE_CAPS[r.type];
    if (cap === undefined)
      throw new Error(`unknown runner record type 0x${r.type.charCodeAt(0).toString(16)}`);
    const p = this.partial ?? { type: r.type, id: r.id, parts: [], size: 0 };
    if (p.type !== r.type || p.id !== r.id) throw new Error('runner messages interleaved');
    p.parts.push(r.data);
    p.size += r.data.length;
    if (p.size > cap) throw new Error(`a runner ${r.type} message over ${cap} bytes`);
    if (r.more) {
      this.partial = p;
      return undefined;
    }
    this.partial = undefined;
    const text = new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(p.parts));
    return { kind: 'json', type: r.type, id: r.id, value: JSON.parse(text) as unknown };
  }
}

// --- the JSON messages, as the runner sends them ---

const int = z.number().int();
const count = z.number().int().min(0);

export const FAILURE_CODES = ['INVALID_REQUEST', 'NOT_FOUND', 'TOO_LARGE', 'BUSY', 'INTERNAL'] as const;
export const FailureSchema = z.object({
  code: z.enum(FAILURE_CODES),
  field: z.string().max(64).optional(),
  message: z.string().max(4096),
});
export type Failure = z.infer<typeof FailureSchema>;

export const OpenedSchema = z.object({ version: int });
export const EmptySchema = z.object({}).strict();
export const BegunSchema = z.object({ pid: int.positive() });
export const SessionExitSchema = ExitReportSchema.extend({ killed: z.boolean() });
export type SessionExit = z.infer<typeof SessionExitSchema>;
export const ConsumedSchema = z.object({ bytes: count });
export const ReadDoneSchema = z.object({ bytes: count });
export const ListDoneSchema = z.object({ count });

export const WireEntrySchema = z.object({
  path: z.string().max(8192),
  type: z.enum(FILE_TYPES),
  size: count,
  mode: int.min(0).max(0o7777),
  mtimeMs: z.number(),
});
export type WireEntry = z.infer<typeof WireEntrySchema>;
export const ListChunkSchema = z.array(WireEntrySchema).max(10_000);

export const WatchEventSchema = z.object({
  path: z.string().max(8192),
  kind: z.enum(['changed', 'removed']),
});

export const ProcessesSchema = z.object({
  processes: z.array(z.object({ pid: int.positive(), pgid: int, command: z.string().max(1024) })).max(1024),
});

export const RecoveredExecSchema = z.object({
  id: int.positive(),
  name: z.string().max(256),
  pid: int,
  running: z.boolean(),
  background: z.boolean(),
  tty: z.boolean(),
  startedAgoMs: z.number().min(0),
  argv: z.array(z.string().max(1024)).max(4096),
});
export type RecoveredExecInfo = z.infer<typeof RecoveredExecSchema>;

/** One acknowledged exec of the runner's history; its kept output follows as 'T' records. */
export const HistoryEntrySchema = z.object({
  id: int.positive(),
  name: z.string().max(256),
  background: z.boolean(),
  startedAgoMs: z.number().min(0),
  finishedAgoMs: z.number().min(0),
  deadlineMs: z.number().min(0),
  window: z.tuple([count, count]),
  argv: z.array(z.string().max(1024)).max(4096),
  report: SessionExitSchema,
});
export type HistoryEntryInfo = z.infer<typeof HistoryEntrySchema>;
export const HistoryDoneSchema = z.object({ count });

export const ResyncSchema = z.object({
  nonce: z.string().regex(/^[0-9a-f]{32}$/),
  version: int,
  opened: z.boolean(),
  ageMs: z.number().min(0).optional(),
  ttlMs: z.number().min(0).optional(),
  idleMs: z.number().min(0).optional(),
  idleForMs: z.number().min(0).optional(),
  meta: z
    .string()
    .max(512 * 1024)
    .optional(),
  /** Protocol 5: the highest exec id the runner has seen (its history's included). */
  lastExecId: count.optional(),
  execs: z.array(RecoveredExecSchema).max(1024).optional(),
});
export type ResyncInfo = z.infer<typeof ResyncSchema>;

export const RUNNER_END_REASONS = [
  'TTLExpired',
  'IdleExpired',
  'Closed',
  'Stopped',
  'StdinClosed',
  'StdoutClosed',
] as const;
export const EndSchema = z.object({ reason: z.enum(RUNNER_END_REASONS) });
export type RunnerEndReason = (typeof RUNNER_END_REASONS)[number];

/** The runner's exit statuses in session mode (what a stopped container's exit code says). */
export const RUNNER_EXIT = {
  closed: 0,
  failed: 1,
  ttl: 3,
  idle: 4,
  stdinClosed: 5,
  neverOpened: 6,
  stopped: 7,
} as const;
