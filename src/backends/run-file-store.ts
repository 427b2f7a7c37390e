/**
 * The output files of runs on one machine (Docker and oci; issue 18), on disk under the state
 * directory: `<dir>/<process>/<run>/<n>`, where the names are this process's (hex of its owner id),
 * the run's id and an index: never a path the sandbox chose. Such a run is known only to the process that
 * ran it, so its files live as long as that process's record of the run (released with it) and
 * go with the process; a process that died leaves its folder to the next one, which removes it.
 * The store is bounded in total: past `maxBytes`, the oldest runs' files go first, and reading one
 * of them says so. A run's files are written to disk off the caller's path: until they are, they
 * are read from memory.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ReturnedFile, ReturnedOutputs } from '../runner/output-files.js';
import type { Logger } from '../observability/logger.js';
import { notKept } from '../runner/run-outputs.js';
import { AppError } from '../shared/errors.js';
import { ownerAlive } from './docker/owner.js';
import type { RunFiles, RunOwner } from './types.js';

export interface RunFileStoreOptions {
  /** Where every sandpit process keeps its folder (`${state}/run-files`); a fresh temporary one when absent. */
  dir?: string | undefined;
  /** Bytes of files kept in all, by this process. */
  maxBytes: number;
  /** This process (currentOwner()): its folder's name. */
  processOwner: string;
  /** Told when a run's files could not be kept or written (reading them then says so). */
  onError?: ((runId: string, message: string) => void) | undefined;
}

interface StoredRun {
  owner: string;
  /** The run's paths, in the order of their files on disk. */
  paths: string[];
  bytes: number;
  /** The files' bytes while they are being written (then undefined). */
  pending: Buffer[] | undefined;
  /** Why they could not be written, when they could not. */
  failed?: string;
}

/** Where a backend keeps its runs' output files, as its options give it. */
export interface RunFilesOptions {
  /** `${state}/run-files`; a fresh temporary folder when absent. */
  dir?: string | undefined;
  /** Bytes of files kept in all by this process (oldest runs' files go first). */
  maxBytes?: number | undefined;
}

/** What a process keeps of its runs' output files by default. */
export const DEFAULT_RUN_FILES_BYTES = 1024 ** 3;

/** The store of a backend's process (`processOwner`), its troubles logged. */
export function runFileStore(
  options: RunFilesOptions | undefined,
  processOwner: string,
  logger: Logger | undefined,
): RunFileStore {
  return new RunFileStore({
    dir: options?.dir,
    maxBytes: options?.maxBytes ?? DEFAULT_RUN_FILES_BYTES,
    processOwner,
    onError: (runId, message) => logger?.warn({ runId, err: message }, "a run's output files were not kept"),
  });
}

/** Runs whose files were evicted, remembered so that a read says why (bounded). */
const MAX_EVICTED = 1000;

export class RunFileStore {
  private readonly options: RunFileStoreOptions;
  private opening: Promise<string> | undefined;
  /** The folder made for this store alone when no `dir` was given: removed on close. */
  private temporary: string | undefined;
  /** Runs with files, oldest first. */
  private readonly runs = new Map<string, StoredRun>();
  private readonly evicted = new Set<string>();
  private total = 0;
  private readonly removals = new Set<Promise<void>>();
  private readonly writes = new Set<Promise<void>>();

  constructor(options: RunFileStoreOptions) {
    this.options = options;
  }

  /** This process's folder, made on first use; the folders of processes that died are removed then. */
  private folder(): Promise<string> {
    this.opening ??= (async () => {
      const base = this.options.dir ?? (this.temporary = await mkdtemp(join(tmpdir(), 'sandpit-run-files-')));
      await mkdir(base, { recursive: true, mode: 0o700 });
      await removeDeadFolders(base);
      const own = join(base, Buffer.from(this.options.processOwner).toString('hex'));
      await rm(own, { recursive: true, force: true });
      await mkdir(own, { mode: 0o700 });
      return own;
    })();
    return this.opening;
  }

  /**
   * Keeps a run's files, evicting the oldest runs' first while the total would exceed the cap.
   * They are readable at once; the disk write finishes later (`written` resolves then).
   */
  save(runId: string, owner: string, files: readonly ReturnedFile[]): void {
    if (files.length === 0) return;
    const bytes = files.reduce((n, f) => n + f.data.length, 0);
    if (bytes > this.options.maxBytes) {
      throw new AppError('TOO_LARGE', `the run's files (${bytes} bytes) exceed the store's cap`);
    }
    for (const [old] of this.runs) {
      if (this.total + bytes <= this.options.maxBytes) break;
      this.evict(old);
    }
    const run: StoredRun = {
      owner,
      paths: files.map((f) => f.path),
      bytes,
      pending: files.map((f) => f.data),
    };
    this.total += bytes;
    this.runs.set(runId, run);
    const write = this.write(runId, run)
      .catch((e: unknown) => {
        run.failed = e instanceof Error ? e.message : String(e);
        this.options.onError?.(runId, `could not write them under the state directory: ${run.failed}`);
      })
      .finally(() => {
        run.pending = undefined;
        this.writes.delete(write);
      });
    this.writes.add(write);
  }

  /**
   * Keeps the files a run returned, as `save()` does; a file the store could not keep is named as
   * not returned, with why, in what comes back.
   */
  keep(runId: string, owner: string, returned: ReturnedOutputs | undefined): ReturnedOutputs | undefined {
    if (!returned || returned.files.length === 0) return returned;
    try {
      this.save(runId, owner, returned.files);
      return returned;
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.options.onError?.(runId, `could not keep them: ${message}`);
      return notKept(returned, `the gateway could not keep it: ${message}`);
    }
  }

  /** The store as the gateway reads it. */
  get runFiles(): RunFiles {
    return {
      read: (runId: string, path: string, owner: RunOwner) => this.read(runId, path, owner.id),
      release: (runId: string) => this.release(runId),
    };
  }

  private async write(runId: string, run: StoredRun): Promise<void> {
    const dir = join(await this.folder(), runId);
    await mkdir(dir, { mode: 0o700 });
    await Promise.all(
      (run.pending ?? []).map((data, i) => writeFile(join(dir, String(i)), data, { mode: 0o600 })),
    );
  }

  /** Resolves once every file saved so far is on disk (or failed to get there). */
  async written(): Promise<void> {
    await Promise.all(this.writes);
  }

  /** A file of a run, by the path the sandbox returned it under. */
  async read(runId: string, path: string, owner: string): Promise<Buffer> {
    const run = this.runs.get(runId);
    const index = run && run.owner === owner ? run.paths.indexOf(path) : -1;
    if (!run || index < 0) {
      throw new AppError('NOT_FOUND', `run ${runId} returned no file ${JSON.stringify(path)}`, {
        hint: this.evicted.has(runId)
          ? 'its files were removed to keep the store within its cap (docker.runFilesBytes): run it again'
          : 'the files a run returned are listed in its result (outputs.files)',
      });
    }
    const pending = run.pending?.[index];
    if (pending) return pending;
    if (run.failed !== undefined) {
      throw new AppError('NOT_FOUND', `run ${runId}'s files could not be kept: ${run.failed}`, {
        hint: 'free disk space under the state directory, then run it again',
      });
    }
    return readFile(join(await this.folder(), runId, String(index)));
  }

  /** The run's record is gone: so are its files. */
  release(runId: string): void {
    const run = this.runs.get(runId);
    if (!run) return;
    this.runs.delete(runId);
    this.total -= run.bytes;
    this.remove(runId);
  }

  /** Bytes kept now. */
  get bytes(): number {
    return this.total;
  }

  /** Removes this process's folder (its runs are forgotten with it). */
  async close(): Promise<void> {
    await this.written();
    await Promise.all(this.removals);
    if (!this.opening) return;
    const own = await this.opening.catch(() => undefined);
    if (own) await rm(this.temporary ?? own, { recursive: true, force: true });
  }

  private evict(runId: string): void {
    this.release(runId);
    this.evicted.add(runId);
    if (this.evicted.size > MAX_EVICTED) this.evicted.delete(this.evicted.values().next().value!);
  }

  private remove(runId: string): void {
    const removal = this.folder()
      .then((own) => rm(join(own, runId), { recursive: true, force: true }))
      .catch(() => undefined)
      .finally(() => this.removals.delete(removal));
    this.removals.add(removal);
  }
}

/** Removes the folders of sandpit processes on this host that are gone. */
async function removeDeadFolders(base: string): Promise<void> {
  const names = await readdir(base).catch(() => [] as string[]);
  await Promise.all(
    names
      .filter((name) => /^[0-9a-f]+$/.test(name) && !ownerAlive(Buffer.from(name, 'hex').toString()))
      .map((name) => rm(join(base, name), { recursive: true, force: true })),
  );
}
