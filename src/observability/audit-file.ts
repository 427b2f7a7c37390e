/**
 * The audit file: append-only JSON Lines, written in batches and fsynced, rotated by size.
 *
 * A line is written and fsynced at most `flushIntervalMs` after it is appended, so a clean close
 * loses nothing and a kill -9 loses at most the last batch. A failed write (ENOSPC, EACCES, EROFS, …)
 * keeps every line that did not reach the file, byte-exact after a short write, and tries again
 * every `retryIntervalMs` until a write and fsync succeed; `failure` says what is wrong meanwhile.
 *
 * Several processes may append to one file (`sandpit run` beside `sandpit mcp`): O_APPEND keeps
 * their batches whole, each follows the path when another rotates it, and rotation takes a lock
 * file so that two writers never rotate at once. Written here rather than taken from a rotating
 * stream library: none fsyncs per batch, keeps unwritten bytes across a failure, or reports one.
 */
import { constants, statfsSync, statSync, type Stats } from 'node:fs';
import { mkdir, open, rename, stat, statfs, unlink, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

export interface AuditFileOptions {
  path: string;
  /** A write that would take the file past this size rotates it first. */
  maxBytes: number;
  /** Rotated files kept: `path.1` (the newest) … `path.N`. */
  maxFiles: number;
  /** Longest a line waits before it is written and fsynced; 0 writes each tick's lines at once. */
  flushIntervalMs: number;
  /** How often a file that failed is tried again. */
  retryIntervalMs?: number;
}

export interface AuditFileEvents {
  /** `lines` more lines are in the file and fsynced. */
  written(lines: number): void;
  failed(error: NodeJS.ErrnoException): void;
  recovered(): void;
}

/**
 * Opening a file on a filesystem with less room than this counts as ENOSPC: a full disk is found
 * before the first run (a one-shot `sandpit run` never gets a second chance), not by its record.
 */
export const MIN_FREE_BYTES = 16 * 1024;

/** A lock older than this was left by a writer that died while rotating. */
const STALE_LOCK_MS = 30_000;

const isErrno = (e: unknown, code: string): boolean => (e as NodeJS.ErrnoException | null)?.code === code;

async function statOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await stat(path);
  } catch (e) {
    if (isErrno(e, 'ENOENT')) return undefined;
    throw e;
  }
}

async function renameIfPresent(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (e) {
    if (!isErrno(e, 'ENOENT')) throw e;
  }
}

/** The error as a typed errno error (a code is what callers act on). */
function asErrno(e: unknown): NodeJS.ErrnoException {
  if (e instanceof Error && typeof (e as NodeJS.ErrnoException).code === 'string') return e;
  return Object.assign(new Error(e instanceof Error ? e.message : String(e)), { code: 'EIO' });
}

/** An error from a write, with how many bytes reached the file before it. */
class ShortWrite extends Error {
  readonly written: number;
  constructor(cause: unknown, written: number) {
    super('short write', { cause });
    this.written = written;
  }
}

export class AuditFile {
  readonly path: string;
  private readonly options: Required<AuditFileOptions>;
  private readonly events: AuditFileEvents;
  private handle: FileHandle | undefined;
  private identity: { dev: number; ino: number } | undefined;
  /** Lines not yet in the file; the first may be partly written (`headOffset` bytes). */
  private readonly queue: Buffer[] = [];
  private headOffset = 0;
  /** Lines in the file since the last fsync. */
  private unsynced = 0;
  private error: NodeJS.ErrnoException | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  /** Lines appended, and lines in the file and fsynced, since the file was made (for written()). */
  private appended = 0;
  private synced = 0;
  private readonly waiters: { line: number; resolve: () => void }[] = [];

  constructor(options: AuditFileOptions, events: AuditFileEvents) {
    this.options = { retryIntervalMs: 1000, ...options };
    this.path = options.path;
    this.events = events;
  }

  /** Why the file cannot be written right now, or undefined while it can. */
  get failure(): NodeJS.ErrnoException | undefined {
    return this.error;
  }

  /**
   * Why the file cannot be written right now, looking as well: a failed write's error, or, for a
   * file that wrote fine so far, its filesystem full. So a disk that fills while no record is due
   * closes the gate before the next run, not after it ran and its record failed. A full disk found
   * so is retried like a failed write. (Other causes, e.g. a read-only remount, fail the next write.)
   */
  check(): NodeJS.ErrnoException | undefined {
    if (this.error || this.closed || !this.identity) return this.error;
    const problem = noRoom(this.path);
    if (problem) {
      this.error = problem;
      this.chain = this.chain.then(() => this.fail(problem));
    }
    return problem;
  }

  /** Lines taken but not yet (wholly) in the file. */
  get pending(): string[] {
    return this.queue.map((b) => b.toString('utf8').trimEnd());
  }

  /** Opens (and creates) the file. Never throws: a failure is reported and retried. */
  open(): Promise<void> {
    return this.flush();
  }

  append(line: string): void {
    this.queue.push(Buffer.from(`${line}\n`, 'utf8'));
    this.appended++;
    this.schedule();
  }

  /**
   * Resolves once every line appended so far is in the file and fsynced, in its own batch's time
   * (no earlier write is forced); while the file fails, not before a write succeeds.
   */
  written(): Promise<void> {
    if (this.synced >= this.appended) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ line: this.appended, resolve }));
  }

  /** A flush within the interval for queued lines (while failing, the retry timer takes them). */
  private schedule(): void {
    if (!this.queue.length || this.flushTimer || this.error || this.closed) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      void this.flush();
    }, this.options.flushIntervalMs);
  }

  /** Writes and fsyncs every line appended so far; resolves when done or failed (see `failure`). */
  flush(): Promise<void> {
    this.chain = this.chain.then(() => this.commit());
    return this.chain;
  }

  /** Writes what is left, then closes the file. Lines that still cannot be written stay `pending`. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.flushTimer);
    clearTimeout(this.retryTimer);
    await this.flush();
    await this.drop();
  }

  private async commit(): Promise<void> {
    if (!this.queue.length && this.handle && !this.error) return;
    try {
      for (let lines = this.queue.length; lines > 0;) lines -= await this.writeBatch(lines);
      await this.sync(this.handle ?? (await this.ensureOpen()));
      if (this.error) {
        this.error = undefined;
        this.events.recovered();
      }
    } catch (e) {
      await this.fail(e instanceof ShortWrite ? e.cause : e);
      return;
    }
    // Lines appended while this commit ran after a failure found no timer to arm.
    this.schedule();
  }

  /** Writes up to `lines` queued lines in one write, rotating first when they would not fit. */
  private async writeBatch(lines: number): Promise<number> {
    let handle = await this.ensureOpen();
    let size = (await handle.stat()).size;
    const first = this.queue[0]!.length - this.headOffset;
    if (size > 0 && this.headOffset === 0 && size + first > this.options.maxBytes) {
      handle = await this.rotate(handle, first);
      size = (await handle.stat()).size;
    }
    let count = 1;
    let bytes = first;
    while (count < lines && size + bytes + this.queue[count]!.length <= this.options.maxBytes) {
      bytes += this.queue[count]!.length;
      count++;
    }
    const chunks = this.queue.slice(0, count);
    chunks[0] = chunks[0]!.subarray(this.headOffset);
    await this.writeAll(handle, Buffer.concat(chunks, bytes));
    return count;
  }

  private async writeAll(handle: FileHandle, buffer: Buffer): Promise<void> {
    let offset = 0;
    try {
      while (offset < buffer.length) {
        const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset);
        offset += bytesWritten;
      }
    } catch (e) {
      throw new ShortWrite(e, offset);
    } finally {
      this.consume(offset);
    }
  }

  /** Drops `bytes` written bytes from the front of the queue. */
  private consume(bytes: number): void {
    while (bytes > 0) {
      const rest = this.queue[0]!.length - this.headOffset;
      if (bytes < rest) {
        this.headOffset += bytes;
        return;
      }
      bytes -= rest;
      this.queue.shift();
      this.headOffset = 0;
      this.unsynced++;
    }
  }

  private async sync(handle: FileHandle): Promise<void> {
    await handle.sync();
    if (this.unsynced) this.events.written(this.unsynced);
    this.synced += this.unsynced;
    this.unsynced = 0;
    while (this.waiters.length && this.waiters[0]!.line <= this.synced) this.waiters.shift()!.resolve();
  }

  /** The open file at `path`: opened when there is none, reopened when another writer rotated it away. */
  private async ensureOpen(): Promise<FileHandle> {
    if (this.handle) {
      const now = await statOrUndefined(this.path);
      if (now && now.ino === this.identity?.ino && now.dev === this.identity.dev) return this.handle;
      await this.drop(true);
    }
    const dir = dirname(this.path);
    await makeDirs(dir);
    const handle = await open(this.path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o600);
    try {
      const st = await handle.stat();
      if (st.isFile()) await assertRoom(this.path);
      await syncDir(dir);
      this.identity = { dev: st.dev, ino: st.ino };
      this.handle = handle;
      return handle;
    } catch (e) {
      await handle.close();
      throw e;
    }
  }

  /**
   * Moves `path` to `path.1` (and each `path.N` one up, the oldest dropped) and opens a new file,
   * under a lock file. When another writer holds the lock, or rotated already, this one follows.
   */
  private async rotate(handle: FileHandle, incoming: number): Promise<FileHandle> {
    const lock = `${this.path}.lock`;
    if (!(await takeLock(lock))) return handle;
    try {
      const now = await statOrUndefined(this.path);
      const ours = now?.ino === this.identity?.ino && now?.dev === this.identity?.dev;
      if (now && ours && now.size > 0 && now.size + incoming > this.options.maxBytes) {
        await this.sync(handle);
        for (let i = this.options.maxFiles - 1; i >= 1; i--)
          await renameIfPresent(`${this.path}.${i}`, `${this.path}.${i + 1}`);
        await rename(this.path, `${this.path}.1`);
      }
      return await this.ensureOpen();
    } finally {
      await unlink(lock).catch(() => undefined);
    }
  }

  /** Closes the open file, fsynced first when `sync` (lines already in it count once synced). */
  private async drop(sync = false): Promise<void> {
    const handle = this.handle;
    this.handle = undefined;
    this.identity = undefined;
    if (!handle) return;
    try {
      if (sync) await this.sync(handle);
    } finally {
      await handle.close().catch(() => undefined);
    }
  }

  private async fail(e: unknown): Promise<void> {
    const error = asErrno(e);
    this.error = error;
    // Reopened on the next try: a remount or a replaced directory gets a fresh descriptor.
    await this.drop().catch(() => undefined);
    this.events.failed(error);
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.flush();
    }, this.options.retryIntervalMs);
    this.retryTimer.unref();
  }
}

/**
 * `mkdir -p` with the real errno: node's recursive mkdir reports ENOENT for a read-only or
 * forbidden parent, and the gate's hint must say EROFS or EACCES.
 */
async function makeDirs(dir: string): Promise<void> {
  try {
    await mkdir(dir, { mode: 0o700 });
  } catch (e) {
    if (isErrno(e, 'EEXIST')) return;
    if (!isErrno(e, 'ENOENT') || dirname(dir) === dir) throw e;
    await makeDirs(dirname(dir));
    await makeDirs(dir);
  }
}

/**
 * Whether the open file at `path` has room for more lines, found without writing one (statfs):
 * ENOSPC when its filesystem has too little. Undefined when there is room, or the file is gone
 * (the next write opens it again) or is no regular file (a device, e.g. /dev/full, is its own judge).
 */
function noRoom(path: string): NodeJS.ErrnoException | undefined {
  try {
    if (!statSync(path).isFile()) return undefined;
    const { bavail, bsize } = statfsSync(path);
    if (bavail * bsize >= MIN_FREE_BYTES) return undefined;
    return Object.assign(
      new Error(`ENOSPC: no space left on device, ${bavail * bsize} bytes free at ${path}`),
      {
        code: 'ENOSPC',
      },
    );
  } catch (e) {
    return isErrno(e, 'ENOENT') ? undefined : asErrno(e);
  }
}

async function assertRoom(path: string): Promise<void> {
  const { bavail, bsize } = await statfs(path);
  if (bavail * bsize >= MIN_FREE_BYTES) return;
  throw Object.assign(new Error(`ENOSPC: no space left on device, ${bavail * bsize} bytes free at ${path}`), {
    code: 'ENOSPC',
  });
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Creates the lock file; false when another writer holds it (a stale one is taken over). */
async function takeLock(lock: string): Promise<boolean> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await (await open(lock, 'wx', 0o600)).close();
      return true;
    } catch (e) {
      if (!isErrno(e, 'EEXIST')) throw e;
      const held = await statOrUndefined(lock);
      if (held && Date.now() - held.mtimeMs < STALE_LOCK_MS) return false;
      await unlink(lock).catch(() => undefined);
    }
  }
  return false;
}
