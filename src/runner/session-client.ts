/**
 * The gateway's end of one session runner (images/runner/session.c): requests with ids out,
 * answers routed back to them, over any byte stream (a Docker attach stream; a pod's attach on
 * Kubernetes). Everything the runner sends is size-capped and schema-checked; the first thing
 * that is not what the protocol allows ends the client with ProtocolError, and nothing else.
 */
import type { ZodType } from 'zod';
import type { EnvPair } from '../policy/session.js';
import { AppError, type ErrorCode } from '../shared/errors.js';
import type { StreamName } from './capture.js';
import type { OutputWindow } from './protocol.js';
import {
  BegunSchema,
  BULK_READ_VERSION,
  CHUNK_BYTES,
  ConsumedSchema,
  EmptySchema,
  encodeRequest,
  encodeResync,
  EndSchema,
  FailureSchema,
  field,
  HistoryDoneSchema,
  HistoryEntrySchema,
  HISTORY_VERSION,
  ListChunkSchema,
  ListDoneSchema,
  MessageAssembler,
  newKey,
  OpenedSchema,
  ProcessesSchema,
  READ_CREDIT,
  READ_WINDOW,
  REC_DATA,
  RETAINED_OUTPUT_BYTES,
  ReadDoneSchema,
  ResyncSchema,
  SessionExitSchema,
  SessionRecordDecoder,
  STDIN_WINDOW,
  WatchEventSchema,
  WireEntrySchema,
  type Failure,
  type Field,
  type HistoryEntryInfo,
  type RequestType,
  type ResyncInfo,
  type RunnerEndReason,
  type RunnerMessage,
  type SessionExit,
  type WireEntry,
} from './session-protocol.js';

export interface SessionWriter {
  /**
   * Writes `parts` in order, as one piece of the stream; resolves once the transport took them
   * (it waits while the transport is full).
   */
  write(parts: readonly Buffer[]): Promise<void>;
}

export type ClientEnd =
  | { reason: 'ProtocolError'; message: string }
  | { reason: 'RunnerEnded'; runnerReason: RunnerEndReason; message: string }
  | { reason: 'TransportClosed'; message: string };

export interface OpenParams {
  ttlMs: number;
  idleMs: number;
  maxExecs: number;
  env: EnvPair[];
  workdir: string;
  /** Opaque to the runner; a resync hands it back (what a restarted gateway adopts by). */
  meta: string;
  /** Each exec's RLIMIT_FSIZE and RLIMIT_NOFILE (a pod has no ulimits of its own). */
  fileSizeBytes: number;
  openFiles: number;
  /** The egress proxy's socket inside the sandbox (Docker, a session with an allowlist; protocol 6). */
  egressSocket?: string | undefined;
  /**
   * Variables of the runner's own environment every exec gets too, unless the session sets them
   * (Kubernetes, a session with an allowlist: the proxy variables its pod has from its Secret; protocol 7).
   */
  inheritEnv?: readonly string[] | undefined;
}

export interface ExecParams {
  /** The gateway's exec id (the runner reports it back on resync). */
  name: string;
  argv: string[];
  env: EnvPair[];
  cwd: string;
  deadlineMs: number;
  window: OutputWindow;
  stdin: Buffer;
  /** Keep stdin open for writeStdin() (else it is `stdin`, then EOF). */
  streamStdin: boolean;
  tty?: { cols: number; rows: number } | undefined;
  background: boolean;
}

export interface ExecEvents {
  output(stream: StreamName, data: Buffer): void;
  tail(stream: StreamName, data: Buffer): void;
}

export interface ExecHandle {
  readonly id: number;
  /** The process id, once it runs; rejects when the exec could not start. */
  readonly begun: Promise<number>;
  /** The runner's exit report; rejects when the session ends first. */
  readonly exit: Promise<SessionExit>;
  writeStdin(data: Buffer): Promise<void>;
  endStdin(): void;
  resize(cols: number, rows: number): void;
  kill(): void;
}

/** One exec of the runner's history: what it reported, and the last bytes of each stream it kept. */
export interface HistoryEntry extends HistoryEntryInfo {
  stdout: Buffer;
  stderr: Buffer;
}

/** The most execs one history answer may hold (the runner keeps at most 64). */
const MAX_HISTORY_ENTRIES = 1024;

export interface FileData {
  entry: WireEntry;
  data: AsyncIterable<Buffer>;
}

export interface WriteParams {
  path: string;
  mode?: number | undefined;
  offset?: number | undefined;
  append?: boolean | undefined;
  /** Total bytes, when known: what cannot fit is refused before a byte is written. */
  size?: number | undefined;
}

const FAILURE_CODES: Record<Failure['code'], ErrorCode> = {
  INVALID_REQUEST: 'INVALID_REQUEST',
  NOT_FOUND: 'NOT_FOUND',
  TOO_LARGE: 'TOO_LARGE',
  BUSY: 'BUSY',
  INTERNAL: 'BACKEND_ERROR',
};

/** The runner's refusal as the typed error callers map: the code, and the field it names. */
export function failureError(f: Failure): AppError {
  return new AppError(FAILURE_CODES[f.code], f.field ? `${f.field}: ${f.message}` : f.message, {
    violations: f.field ? [{ field: f.field, message: f.message }] : [],
  });
}

class ProtocolViolation extends Error {}

function parse<T>(schema: ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success)
    throw new ProtocolViolation(`malformed ${what} from the runner: ${r.error.issues[0]?.message}`);
  return r.data;
}

interface Operation {
  handle(msg: RunnerMessage): void;
  fail(error: Error): void;
}

/** Messages an operation takes besides its answer; true when `msg` was one. */
type Extra = (msg: RunnerMessage) => boolean;

/** An operation answered once by 'A' (parsed by `schema`) or 'F'; `extra` sees what comes before. */
class Reply<T> implements Operation {
  readonly promise: Promise<T>;
  private resolve!: (v: T) => void;
  private reject!: (e: Error) => void;
  private readonly schema: ZodType<T>;
  private readonly done: () => void;
  private readonly extra: Extra | undefined;

  constructor(schema: ZodType<T>, done: () => void, extra?: Extra) {
    this.schema = schema;
    this.done = done;
    this.extra = extra;
    this.promise = new Promise<T>((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
    this.promise.catch(() => {});
  }

  handle(msg: RunnerMessage): void {
    if (this.extra?.(msg)) return;
    if (msg.kind === 'json' && msg.type === 'A') {
      this.done();
      this.resolve(parse(this.schema, msg.value, 'answer'));
    } else if (msg.kind === 'json' && msg.type === 'F') {
      this.done();
      this.reject(failureError(parse(FailureSchema, msg.value, 'failure')));
    } else {
      throw new ProtocolViolation(`an unexpected '${msg.type}' record for request ${msg.id}`);
    }
  }

  fail(error: Error): void {
    this.reject(error);
  }
}

/** A watch: answered once, then its change events until it is stopped. */
class WatchOp implements Operation {
  readonly started: Reply<Record<string, never>>;
  private watching = false;
  private readonly onChange: (c: FileChangeEvent) => void;

  constructor(onChange: (c: FileChangeEvent) => void, done: () => void) {
    this.onChange = onChange;
    this.started = new Reply(EmptySchema, done);
  }

  handle(msg: RunnerMessage): void {
    if (msg.kind === 'json' && msg.type === 'w') {
      if (!this.watching) throw new ProtocolViolation('a watch event before the watch');
      this.onChange(parse(WatchEventSchema, msg.value, 'watch event'));
      return;
    }
    this.watching = msg.kind === 'json' && msg.type === 'A';
    this.started.handle(msg);
  }

  fail(error: Error): void {
    this.started.fail(error);
  }
}

export interface FileChangeEvent {
  path: string;
  kind: 'changed' | 'removed';
}

const streamOf = (b: number): StreamName => (b === 2 ? 'stderr' : 'stdout');

/** One exec as the runner reports it: start, output, tail, stdin credit, exit (or failure). */
class ExecOp implements Operation {
  readonly begun: Promise<number>;
  readonly exit: Promise<SessionExit>;
  private begunResolve!: (pid: number) => void;
  private begunReject!: (e: Error) => void;
  private exitResolve!: (r: SessionExit) => void;
  private exitReject!: (e: Error) => void;
  private readonly events: ExecEvents;
  private readonly done: () => void;
  /** Stdin bytes sent that the runner has not yet put into the program's pipe. */
  inFlight = 0;
  finished = false;
  private wake: (() => void) | undefined;

  constructor(events: ExecEvents, done: () => void) {
    this.events = events;
    this.done = done;
    this.begun = new Promise<number>((res, rej) => {
      this.begunResolve = res;
      this.begunReject = rej;
    });
    this.exit = new Promise<SessionExit>((res, rej) => {
      this.exitResolve = res;
      this.exitReject = rej;
    });
    this.begun.catch(() => {});
    this.exit.catch(() => {});
  }

  /** A resynced exec: it began under another gateway. */
  markBegun(): void {
    this.begunResolve(0);
  }

  handle(msg: RunnerMessage): void {
    if (msg.kind === 'data') return this.data(msg.type, msg.data);
    switch (msg.type) {
      case 'B':
        return this.begunResolve(parse(BegunSchema, msg.value, 'exec start').pid);
      case 'c':
        this.inFlight = Math.max(0, this.inFlight - parse(ConsumedSchema, msg.value, 'stdin credit').bytes);
        return this.wake?.();
      case 'X': {
        const report = parse(SessionExitSchema, msg.value, 'exit report');
        this.settle();
        this.begunResolve(0);
        return this.exitResolve(report);
      }
      case 'F': {
        const err = failureError(parse(FailureSchema, msg.value, 'failure'));
        this.settle();
        this.begunReject(err);
        return this.exitReject(err);
      }
      default:
        throw new ProtocolViolation(`an unexpected '${msg.type}' record for an exec`);
    }
  }

  private data(type: 'O' | 'E' | 'T' | 'd', data: Buffer): void {
    if (type === 'O' || type === 'E') return this.events.output(type === 'O' ? 'stdout' : 'stderr', data);
    if (type !== 'T' || data.length < 1 || (data[0] !== 1 && data[0] !== 2))
      throw new ProtocolViolation(`an unexpected '${type}' record for an exec`);
    this.events.tail(streamOf(data[0]), data.subarray(1));
  }

  private settle(): void {
    this.finished = true;
    this.done();
    this.wake?.();
  }

  fail(error: Error): void {
    this.finished = true;
    this.wake?.();
    this.begunReject(error);
    this.exitReject(error);
  }

  /** Waits while the runner holds a full window of this exec's stdin. */
  async room(): Promise<void> {
    while (!this.finished && this.inFlight >= STDIN_WINDOW) await new Promise<void>((r) => (this.wake = r));
  }
}

/**
 * A pull-fed stream of one download's bytes, handed over as they arrived (views, not copies), and
 * credit going back to the runner as the reader takes them.
 */
class Download implements AsyncIterable<Buffer> {
  private chunks: Buffer[] = [];
  private waiting: { resolve: (r: IteratorResult<Buffer>) => void; reject: (e: Error) => void } | undefined;
  private scheduled = false;
  private ended = false;
  private error: Error | undefined;
  private uncredited = 0;
  private readonly credit: (bytes: number) => void;
  private readonly cancel: () => void;

  constructor(credit: (bytes: number) => void, cancel: () => void) {
    this.credit = credit;
    this.cancel = cancel;
  }

  push(data: Buffer): void {
    this.chunks.push(data);
    if (this.waiting && !this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => this.deliver());
    }
  }

  end(error?: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error;
    if (this.waiting && !this.scheduled) this.deliver();
  }

  private deliver(): void {
    this.scheduled = false;
    const w = this.waiting;
    if (!w) return;
    this.waiting = undefined;
    this.next().then(w.resolve, w.reject);
  }

  private next(): Promise<IteratorResult<Buffer>> {
    if (this.chunks.length > 0) {
      const value = this.take();
      this.took(value.length);
      return Promise.resolve({ value, done: false });
    }
    if (this.ended)
      return this.error ? Promise.reject(this.error) : Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => (this.waiting = { resolve, reject }));
  }

  /** The next piece: a bulk record's as it came, or a run of small ones (an older runner's) joined. */
  private take(): Buffer {
    const first = this.chunks[0]!;
    let count = 1;
    let bytes = first.length;
    if (first.length <= REC_DATA)
      while (count < this.chunks.length && this.chunks[count]!.length <= REC_DATA)
        bytes += this.chunks[count++]!.length;
    const taken = this.chunks.splice(0, count);
    return count === 1 ? first : Buffer.concat(taken, bytes);
  }

  private took(n: number): void {
    this.uncredited += n;
    if (this.uncredited >= READ_CREDIT) {
      this.credit(this.uncredited);
      this.uncredited = 0;
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return {
      next: () => this.next(),
      return: () => {
        if (!this.ended) this.cancel();
        this.ended = true;
        this.chunks = [];
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

export class SessionClient {
  private readonly writer: SessionWriter;
  private readonly key: Buffer;
  private readonly decoder: SessionRecordDecoder;
  private readonly assembler = new MessageAssembler();
  private readonly ops = new Map<number, Operation>();
  private nextId = 1;
  private endInfo: ClientEnd | undefined;
  private endResolve!: (e: ClientEnd) => void;
  private resyncWaiter: { nonce: string; resolve: (info: ResyncInfo) => void } | undefined;
  /** The runner's protocol, once its open or resync answered. */
  private runnerVersion = 0;
  /** Resolves once when the client ends: a protocol error, the runner's end, or the transport's. */
  readonly ended = new Promise<ClientEnd>((r) => (this.endResolve = r));

  /** `key`: what the runner's records start with (given to it by open() or resync()). */
  constructor(writer: SessionWriter, key: Buffer) {
    this.writer = writer;
    this.key = key;
    this.decoder = new SessionRecordDecoder(key);
  }

  /** Bytes on the channel that were not the runner's records (something else wrote into it). */
  get skippedBytes(): number {
    return this.decoder.skippedBytes;
  }

  get isEnded(): boolean {
    return this.endInfo !== undefined;
  }

  /** Feeds what the runner wrote (after its ready frame). */
  push(data: Buffer): void {
    if (this.endInfo) return;
    try {
      for (const record of this.decoder.push(data)) {
        const msg = this.assembler.add(record);
        if (msg) this.dispatch(msg);
        if (this.endInfo) return;
      }
    } catch (e) {
      this.end({ reason: 'ProtocolError', message: (e as Error).message });
    }
  }

  /** The byte stream is gone (the container stopped, the attach broke). */
  transportClosed(message: string): void {
    this.end({ reason: 'TransportClosed', message });
  }

  end(info: ClientEnd): void {
    if (this.endInfo) return;
    this.endInfo = info;
    const error = new AppError(
      'BACKEND_ERROR',
      `the session's runner is gone (${info.reason}: ${info.message})`,
    );
    for (const op of this.ops.values()) op.fail(error);
    this.ops.clear();
    this.endResolve(info);
  }

  private dispatch(msg: RunnerMessage): void {
    if (msg.kind === 'json' && msg.type === 'Z') {
      const { reason } = parse(EndSchema, msg.value, 'end notice');
      this.end({
        reason: 'RunnerEnded',
        runnerReason: reason,
        message: `the runner ended the session (${reason})`,
      });
      return;
    }
    if (msg.kind === 'json' && msg.type === 'Y') {
      const info = parse(ResyncSchema, msg.value, 'resync answer');
      if (this.resyncWaiter?.nonce === info.nonce) this.resyncWaiter.resolve(info);
      return;
    }
    // Answers to requests this client never made (an earlier gateway's, after a resync) are dropped.
    this.ops.get(msg.id)?.handle(msg);
  }

  private send(type: RequestType, id: number, body: Buffer | readonly Field[] = []): Promise<void> {
    if (this.endInfo) return Promise.resolve();
    return this.writer.write(encodeRequest(type, id, body)).catch((e: unknown) => {
      this.transportClosed(`writing to the runner failed: ${(e as Error).message}`);
    });
  }

  /** Registers `op` under a new id and sends its request (or fails it at once once ended). */
  private start(op: Operation, type: RequestType, fields: readonly Field[], id = this.nextId++): number {
    if (this.endInfo) op.fail(new AppError('BACKEND_ERROR', "the session's runner is gone"));
    else {
      this.ops.set(id, op);
      void this.send(type, id, fields);
    }
    return id;
  }

  private request<T>(
    type: RequestType,
    fields: readonly Field[],
    schema: ZodType<T>,
    extra?: Extra,
  ): { id: number; promise: Promise<T> } {
    const id = this.nextId++;
    const op = new Reply(schema, () => this.ops.delete(id), extra);
    this.start(op, type, fields, id);
    return { id, promise: op.promise };
  }

  open(p: OpenParams): Promise<number> {
    const fields: Field[] = [
      field.bytes('k', this.key),
      field.u64('T', p.ttlMs),
      field.u64('I', p.idleMs),
      field.u32('x', p.maxExecs),
      field.bytes('w', p.workdir),
      field.bytes('m', p.meta),
      field.u64u32('l', p.fileSizeBytes, p.openFiles),
      ...p.env.map((e) => field.bytes('e', `${e.name}=${e.value}`)),
      ...(p.egressSocket ? [field.bytes('p', p.egressSocket)] : []),
      ...(p.inheritEnv ?? []).map((name) => field.bytes('v', name)),
    ];
    return this.request('S', fields, OpenedSchema).promise.then((r) => (this.runnerVersion = r.version));
  }

  /**
   * Re-attaches to a runner another gateway opened: the resync sequence (the key stays the one the open gave the runner),
   * then the runner's account of itself. Request ids go on above those of the execs it knows.
   */
  async resync(): Promise<ResyncInfo> {
    const nonce = newKey();
    const answered = new Promise<ResyncInfo>(
      (resolve) => (this.resyncWaiter = { nonce: nonce.toString('hex'), resolve }),
    );
    await this.writer.write([encodeResync(nonce)]);
    const gone = this.ended.then((e) => Promise.reject(new Error(e.message)));
    const info = await Promise.race([answered, gone]);
    this.resyncWaiter = undefined;
    this.runnerVersion = info.version;
    this.nextId = Math.max(
      this.nextId,
      (info.lastExecId ?? 0) + 1,
      ...(info.execs ?? []).map((e) => e.id + 1),
    );
    return info;
  }

  /**
   * The execs whose reports a gateway acknowledged, oldest first, each with the last
   * RETAINED_OUTPUT_BYTES of its streams; none from a runner before protocol 5.
   */
  async history(): Promise<HistoryEntry[]> {
    if (this.runnerVersion < HISTORY_VERSION) return [];
    const entries: { info: HistoryEntryInfo; stdout: Buffer[]; stderr: Buffer[]; bytes: number[] }[] = [];
    const done = await this.request('I', [], HistoryDoneSchema, (msg) => {
      if (msg.kind === 'json' && msg.type === 'h') {
        if (entries.length >= MAX_HISTORY_ENTRIES) throw new ProtocolViolation('a history over its limit');
        entries.push({
          info: parse(HistoryEntrySchema, msg.value, 'history entry'),
          stdout: [],
          stderr: [],
          bytes: [0, 0],
        });
        return true;
      }
      if (msg.kind !== 'data' || msg.type !== 'T') return false;
      const last = entries.at(-1);
      if (!last || msg.data.length < 1) throw new ProtocolViolation('history output outside an exec');
      const k = msg.data[0] === 2 ? 1 : 0;
      last.bytes[k]! += msg.data.length - 1;
      if (last.bytes[k]! > RETAINED_OUTPUT_BYTES)
        throw new ProtocolViolation('history output over its limit');
      (k === 1 ? last.stderr : last.stdout).push(Buffer.from(msg.data.subarray(1)));
      return true;
    }).promise;
    if (done.count !== entries.length) {
      const message = `a history of ${entries.length} execs that says it has ${done.count}`;
      this.end({ reason: 'ProtocolError', message });
      throw new AppError('BACKEND_ERROR', `the session's runner sent ${message}`);
    }
    return entries.map((e) => ({
      ...e.info,
      stdout: Buffer.concat(e.stdout),
      stderr: Buffer.concat(e.stderr),
    }));
  }

  ping(): Promise<void> {
    return this.request('H', [], EmptySchema).promise.then(() => {});
  }

  setLifetime(p: { ttlMs: number; idleMs: number }): Promise<void> {
    const fields = [field.u64('T', p.ttlMs), field.u64('I', p.idleMs)];
    return this.request('J', fields, EmptySchema).promise.then(() => {});
  }

  /** Asks the runner to kill everything and exit; resolves on its answer. */
  close(): Promise<void> {
    return this.request('Q', [], EmptySchema).promise.then(() => {});
  }

  processes(): Promise<{ pid: number; pgid: number; command: string }[]> {
    return this.request('P', [], ProcessesSchema).promise.then((r) => r.processes);
  }

  exec(p: ExecParams, events: ExecEvents): ExecHandle {
    // A tty always reads the terminal; other stdin goes inline when small and not streamed.
    const inline = !p.streamStdin && !p.tty && p.stdin.length <= CHUNK_BYTES;
    const window = Buffer.alloc(8);
    window.writeUInt32BE(p.window.headBytes, 0);
    window.writeUInt32BE(p.window.tailBytes, 4);
    const fields: Field[] = [
      ...p.argv.map((a) => field.bytes('a', a)),
      ...p.env.map((e) => field.bytes('e', `${e.name}=${e.value}`)),
      field.bytes('c', p.cwd),
      field.u32('t', p.deadlineMs),
      ['o', window],
      field.bytes('n', p.name),
      ...(p.tty ? [field.u16pair('y', p.tty.cols, p.tty.rows)] : []),
      ...(p.background ? [field.flag('b')] : []),
      ...(inline ? (p.stdin.length ? [field.bytes('i', p.stdin)] : []) : [field.flag('s')]),
    ];
    const id = this.nextId++;
    const op = new ExecOp(events, () => this.ops.delete(id));
    this.start(op, 'X', fields, id);
    const handle = this.handle(id, op, p.tty !== undefined);
    if (!inline) {
      void (async () => {
        await handle.writeStdin(p.stdin);
        if (!p.streamStdin) handle.endStdin();
      })();
    }
    return handle;
  }

  /** Follows an exec the runner already runs (or finished): one a resync reported. */
  attach(id: number, events: ExecEvents, tty: boolean): ExecHandle {
    const op = new ExecOp(events, () => this.ops.delete(id));
    op.markBegun();
    if (this.endInfo) op.fail(new AppError('BACKEND_ERROR', "the session's runner is gone"));
    else this.ops.set(id, op);
    return this.handle(id, op, tty);
  }

  private handle(id: number, op: ExecOp, tty: boolean): ExecHandle {
    // Acknowledged at once, so that the runner forgets the report; a restarted gateway gets the rest.
    void op.exit.then(() => this.send('Y', id)).catch(() => {});
    return {
      id,
      begun: op.begun,
      exit: op.exit,
      writeStdin: async (data: Buffer) => {
        for (let off = 0; off < data.length;) {
          await op.room();
          if (op.finished || this.endInfo) return;
          const piece = data.subarray(off, off + Math.min(CHUNK_BYTES, STDIN_WINDOW - op.inFlight));
          op.inFlight += piece.length;
          off += piece.length;
          await this.send('D', id, piece);
        }
      },
      endStdin: () => void this.send('Z', id),
      resize: (cols, rows) => {
        if (tty) void this.send('G', id, [field.u16pair('g', cols, rows)]);
      },
      kill: () => void this.send('K', id),
    };
  }

  async write(p: WriteParams, data: Buffer | AsyncIterable<Buffer>): Promise<WireEntry> {
    const whole = Buffer.isBuffer(data) && data.length <= CHUNK_BYTES;
    const size = Buffer.isBuffer(data) ? data.length : p.size;
    const fields: Field[] = [
      field.bytes('p', p.path),
      ...(p.mode !== undefined ? [field.u32('M', p.mode)] : []),
      ...(p.offset !== undefined ? [field.u64('o', p.offset)] : []),
      ...(p.append ? [field.flag('a')] : []),
      ...(size !== undefined ? [field.u64('s', size)] : []),
      ...(whole ? [field.bytes('d', data), field.flag('z')] : []),
    ];
    let failed = false;
    const { id, promise } = this.request('W', fields, WireEntrySchema);
    promise.catch(() => (failed = true));
    if (whole) return promise;
    try {
      for await (const chunk of chunks(data)) {
        if (failed || this.endInfo) break;
        await this.send('D', id, chunk);
      }
    } catch (e) {
      void this.send('K', id); // the source failed: the runner drops what it wrote
      this.ops.delete(id);
      throw e;
    }
    if (!failed) void this.send('Z', id);
    return promise;
  }

  async read(path: string, maxBytes: number): Promise<FileData> {
    let entryResolve!: (e: WireEntry) => void;
    const entry = new Promise<WireEntry>((r) => (entryResolve = r));
    let expected = Infinity;
    let received = 0;
    let id = 0;
    const download = new Download(
      (bytes) => void this.send('C', id, [field.u32('c', bytes)]),
      () => {
        if (this.ops.delete(id)) void this.send('K', id);
      },
    );
    const req = this.request(
      'R',
      [
        field.bytes('p', path),
        field.u64('m', maxBytes),
        field.u32('c', READ_WINDOW),
        ...(this.runnerVersion >= BULK_READ_VERSION ? [field.flag('B')] : []),
      ],
      ReadDoneSchema,
      (msg) => {
        if (msg.kind === 'json' && msg.type === 'H') {
          const e = parse(WireEntrySchema, msg.value, 'file entry');
          expected = e.size;
          entryResolve(e);
          return true;
        }
        if (msg.kind !== 'data' || msg.type !== 'd') return false;
        received += msg.data.length;
        if (received > expected) throw new ProtocolViolation('a download longer than its file');
        download.push(msg.data);
        return true;
      },
    );
    id = req.id;
    req.promise.then(
      () => download.end(),
      (e: Error) => download.end(e),
    );
    const first = await Promise.race([entry, req.promise.then(() => undefined)]);
    if (first) return { entry: first, data: download };
    this.end({ reason: 'ProtocolError', message: 'a download finished before its file entry' });
    throw new AppError('BACKEND_ERROR', 'the runner answered a read without its file entry');
  }

  async list(path: string, recursive: boolean, maxEntries: number): Promise<WireEntry[]> {
    const entries: WireEntry[] = [];
    const fields = [
      field.bytes('p', path),
      ...(recursive ? [field.flag('r')] : []),
      field.u32('n', maxEntries),
    ];
    await this.request('L', fields, ListDoneSchema, (msg) => {
      if (msg.kind !== 'json' || msg.type !== 'l') return false;
      for (const e of parse(ListChunkSchema, msg.value, 'listing')) entries.push(e);
      if (entries.length > maxEntries) throw new ProtocolViolation('a listing over its limit');
      return true;
    }).promise;
    return entries;
  }

  async remove(path: string, recursive: boolean): Promise<void> {
    const fields = [field.bytes('p', path), ...(recursive ? [field.flag('r')] : [])];
    await this.request('U', fields, EmptySchema).promise;
  }

  mkdir(path: string): Promise<WireEntry> {
    return this.request('M', [field.bytes('p', path)], WireEntrySchema).promise;
  }

  /** Resolves once the runner watches `path`; the returned function stops it. */
  async watch(path: string, onChange: (c: FileChangeEvent) => void): Promise<() => void> {
    let keep = true;
    const op = new WatchOp(onChange, () => {
      if (!keep) this.ops.delete(id);
    });
    const id = this.start(op, 'N', [field.bytes('p', path)]);
    await op.started.promise.catch((e: unknown) => {
      keep = false;
      this.ops.delete(id);
      throw e;
    });
    return () => {
      if (this.ops.delete(id)) void this.send('V', id);
    };
  }
}

/** The data of an upload in pieces the runner takes (at most CHUNK_BYTES each). */
async function* chunks(data: Buffer | AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  if (Buffer.isBuffer(data)) {
    for (let off = 0; off < data.length; off += CHUNK_BYTES) yield data.subarray(off, off + CHUNK_BYTES);
    return;
  }
  for await (const chunk of data) {
    for (let off = 0; off < chunk.length; off += CHUNK_BYTES) yield chunk.subarray(off, off + CHUNK_BYTES);
  }
}
