/**
 * `sandpit sessions cp SRC DEST`: files in and out of a session, as `docker cp` reads its operands.
 * `ID:PATH` is a path in session ID's workspace; anything else is local (write a local path with a
 * colon as ./a:b); `-` is stdin or stdout. Uploads stream each file to PUT /files (a directory file
 * by file); downloads stream GET /files, or a directory's artifacts tar extracted with tar-stream.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, type Stats } from 'node:fs';
import { lstat, mkdir, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import { basename, dirname, join, posix, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { extract } from 'tar-stream';
import * as z from 'zod';
import {
  FileEntrySchema,
  PATH_RULE,
  SessionSchema,
  toWorkspacePath,
  type FileEntry,
} from '../api/session.js';
import { AppError, isAppError } from '../shared/errors.js';
import { parse, printHelp } from './args.js';
import { encodePath, sessionPath, type GatewayClient } from './gateway-client.js';
import { clientOf, GATEWAY_HELP, GATEWAY_OPTIONS, printJson, usageError } from './session-flags.js';

export const CP_USAGE = `
usage: sandpit sessions cp SRC DEST [options]

Copies a file or a directory between this machine and a session, as \`docker cp\` does. One of
SRC and DEST is ID:PATH, a path in session ID's workspace (relative, or under /workspace; ID: is
the workspace itself); the other is a local path, or - for stdin or stdout.

  sandpit sessions cp script.py $ID:               into the workspace, as script.py
  sandpit sessions cp ./src $ID:app                a directory, recursively: app/... (or app/src/...
                                                   when app is a directory already)
  sandpit sessions cp $ID:out.json .               a file down, into the current directory
  sandpit sessions cp $ID:results ./results        a directory down, through the artifacts tar
  sandpit sessions cp $ID:report.txt - | less      a file to stdout (a directory: its tar)
  tar -c data | sandpit sessions cp - $ID:data.tar stdin to one file

A directory that exists receives SRC inside it; DIR/. copies DIR's contents instead. A file keeps
its permission bits, a download its modification time. Only regular files and directories are
copied: a local symbolic link, device file or socket is skipped and named, and so is an empty
local directory (the REST API makes directories only as the parents of a file). A download is
written to a temporary name and renamed, so a failed one leaves nothing half-written.
${GATEWAY_HELP.replace("print the gateway's answer as JSON", 'print {"copied": [...], "skipped": [...]}')}
`;

/** One operand: a local path, stdin/stdout, or a path in a session's workspace. */
export type CpEnd =
  | { kind: 'local'; path: string; contents: boolean }
  | { kind: 'stdio' }
  | {
      kind: 'session';
      id: string;
      /** Workspace-relative; '' is the workspace itself. */
      path: string;
      /** Ends with / (a directory is meant). */
      slash: boolean;
      /** A directory's contents rather than the directory (DIR/., or the workspace). */
      contents: boolean;
    };

const SESSION_OPERAND = /^([A-Za-z0-9][A-Za-z0-9_.-]*):(.*)$/s;
const endsWithDot = (p: string): boolean => p === '.' || p.endsWith('/.');

export function parseCpEnd(arg: string): CpEnd {
  if (arg === '-') return { kind: 'stdio' };
  if (arg === '') throw usageError('an empty path', 'cp');
  const m = arg.startsWith('/') || arg.startsWith('.') ? null : SESSION_OPERAND.exec(arg);
  if (!m) {
    if (!arg.startsWith('/') && !arg.startsWith('.') && arg.includes(':'))
      throw usageError(
        `"${arg}" is not ID:PATH (IDs are letters, digits, . _ -); a local path: ./${arg}`,
        'cp',
      );
    return { kind: 'local', path: arg, contents: endsWithDot(arg) };
  }
  const [, id, raw] = m as unknown as [string, string, string];
  const path = toWorkspacePath(raw);
  if (path === undefined) {
    throw new AppError('INVALID_REQUEST', `invalid session path ${JSON.stringify(raw)} in ${arg}`, {
      violations: [{ field: 'path', message: PATH_RULE }],
      hint: 'name a path inside the workspace, e.g. ID:data/input.csv (ID: is the workspace itself)',
    });
  }
  return { kind: 'session', id, path, slash: raw.endsWith('/'), contents: path === '' || endsWithDot(raw) };
}

export interface Copied {
  from: string;
  to: string;
  bytes: number;
}
export interface Skipped {
  path: string;
  why: string;
}
interface Report {
  copied: Copied[];
  skipped: Skipped[];
}

type SessionEnd = Extract<CpEnd, { kind: 'session' }>;
type OtherEnd = Exclude<CpEnd, { kind: 'session' }>;

export async function cpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, GATEWAY_OPTIONS, CP_USAGE);
  if (values.help) return (printHelp(CP_USAGE), 0);
  if (positionals.length !== 2) throw usageError('cp takes SRC and DEST', 'cp');
  const [src, dst] = positionals.map(parseCpEnd) as [CpEnd, CpEnd];
  if ((src.kind === 'session') === (dst.kind === 'session'))
    throw usageError('one of SRC and DEST is ID:PATH in a session, the other local or -', 'cp');
  if (values.json && dst.kind === 'stdio')
    throw usageError('--json and - as DEST both write to stdout: give one', 'cp');
  const client = clientOf(values);
  const report: Report = { copied: [], skipped: [] };
  if (src.kind === 'session') await download(client, src, dst as OtherEnd, report);
  else await upload(client, src, dst as SessionEnd, report);
  if (values.json) printJson(report);
  else printReport(report, src.kind === 'stdio' || dst.kind === 'stdio');
  return 0;
}

function printReport(report: Report, quiet: boolean): void {
  for (const s of report.skipped) process.stderr.write(`sandpit: skipped ${s.path}: ${s.why}\n`);
  if (quiet) return;
  const bytes = report.copied.reduce((n, c) => n + c.bytes, 0);
  const files = report.copied.length;
  process.stderr.write(`copied ${files} file${files === 1 ? '' : 's'} (${bytes} bytes)\n`);
}

const FileListSchema = z.object({ entries: z.array(FileEntrySchema) });

/**
 * What PATH is in the session: its entry, or undefined when there is nothing there. A listing of
 * a file is the file's own entry; of a directory, its children.
 */
async function remoteEntry(client: GatewayClient, id: string, path: string): Promise<FileEntry | undefined> {
  if (path === '')
    return { path: '', type: 'directory', size: 0, mode: '0755', mtime: new Date(0).toISOString() };
  try {
    const { entries } = await client.json(FileListSchema, 'GET', sessionPath(id, 'files'), {
      query: { path },
    });
    const own = entries.length === 1 && entries[0]!.path === path ? entries[0] : undefined;
    return own && own.type !== 'directory'
      ? own
      : { path, type: 'directory', size: 0, mode: '0755', mtime: new Date(0).toISOString() };
  } catch (e) {
    if (isAppError(e) && e.code === 'NOT_FOUND') return undefined;
    throw e;
  }
}

/** The session, or its NOT_FOUND: asked first, so that a missing path is told apart from a missing session. */
async function requireSession(client: GatewayClient, id: string): Promise<void> {
  await client.json(SessionSchema, 'GET', sessionPath(id));
}

// --- up -------------------------------------------------------------------------------------

async function put(
  client: GatewayClient,
  id: string,
  path: string,
  source: { stream: Readable; mode?: number },
): Promise<FileEntry> {
  return client.json(FileEntrySchema, 'PUT', sessionPath(id, 'files', encodePath(path)), {
    stream: Readable.toWeb(source.stream) as ReadableStream<Uint8Array>,
    query: { mode: source.mode !== undefined ? (source.mode & 0o777).toString(8) : undefined },
  });
}

async function upload(client: GatewayClient, src: OtherEnd, dst: SessionEnd, report: Report): Promise<void> {
  await requireSession(client, dst.id);
  const remote = await remoteEntry(client, dst.id, dst.path);
  const into = remote?.type === 'directory';
  if (src.kind === 'stdio') return uploadStdin(client, { dst, into }, report);
  const st = await localStat(src.path);
  if (!st) throw new AppError('NOT_FOUND', `no local file or directory ${src.path}`);
  if (remote && !into && (st.isDirectory() || dst.slash))
    throw usageError(`${dst.id}:${dst.path} is a ${remote.type}, not a directory`, 'cp');
  const name = basename(resolve(src.path));
  if (st.isFile()) {
    const target = into || dst.slash ? posix.join(dst.path, name) : dst.path;
    const entry = await put(client, dst.id, target, { stream: createReadStream(src.path), mode: st.mode });
    report.copied.push({ from: src.path, to: `${dst.id}:${entry.path}`, bytes: entry.size });
  } else if (st.isDirectory()) {
    const base = into && !src.contents ? posix.join(dst.path, name) : dst.path;
    await uploadTree(client, { dir: src.path, id: dst.id, base }, report);
  } else {
    report.skipped.push({ path: src.path, why: 'not a regular file or directory' });
  }
}

async function uploadStdin(
  client: GatewayClient,
  { dst, into }: { dst: SessionEnd; into: boolean },
  report: Report,
): Promise<void> {
  if (into || dst.slash)
    throw usageError(`- writes one file: ${dst.id}:${dst.path || '.'} is a directory`, 'cp');
  const entry = await put(client, dst.id, dst.path, { stream: process.stdin });
  report.copied.push({ from: '-', to: `${dst.id}:${entry.path}`, bytes: entry.size });
}

async function uploadTree(
  client: GatewayClient,
  tree: { dir: string; id: string; base: string },
  report: Report,
): Promise<void> {
  const entries = await readdir(tree.dir, { withFileTypes: true });
  if (entries.length === 0) {
    report.skipped.push({
      path: tree.dir,
      why: 'an empty directory (the REST API makes directories only as parents)',
    });
  }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const local = join(tree.dir, e.name);
    const remote = posix.join(tree.base, e.name);
    if (e.isDirectory()) {
      await uploadTree(client, { dir: local, id: tree.id, base: remote }, report);
    } else if (e.isFile()) {
      const { mode } = await stat(local);
      const entry = await put(client, tree.id, remote, { stream: createReadStream(local), mode });
      report.copied.push({ from: local, to: `${tree.id}:${entry.path}`, bytes: entry.size });
    } else {
      report.skipped.push({
        path: local,
        why: e.isSymbolicLink() ? 'a symbolic link' : 'not a regular file',
      });
    }
  }
}

async function localStat(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new AppError('INVALID_REQUEST', `cannot read ${path}: ${(e as Error).message}`);
  }
}

// --- down -----------------------------------------------------------------------------------

const bodyOf = (res: Response): Readable =>
  res.body ? Readable.fromWeb(res.body as WebReadableStream<Uint8Array>) : Readable.from([]);

async function download(
  client: GatewayClient,
  src: SessionEnd,
  dst: OtherEnd,
  report: Report,
): Promise<void> {
  await requireSession(client, src.id);
  const remote = await remoteEntry(client, src.id, src.path);
  const from = `${src.id}:${src.path || '.'}`;
  if (!remote) {
    throw new AppError('NOT_FOUND', `no file or directory ${src.path} in session ${src.id}`, {
      hint: `see what is there with \`sandpit sessions exec ${src.id} -- ls -la\``,
    });
  }
  if (remote.type === 'file') {
    if (src.slash) throw usageError(`${from} is a file, not a directory`, 'cp');
    return downloadFile(client, { src, entry: remote, dst }, report);
  }
  if (remote.type !== 'directory')
    throw usageError(`${from} is a ${remote.type}: only files and directories are copied`, 'cp');
  const local = dst.kind === 'local' ? await localStat(dst.path) : undefined;
  if (local && !local.isDirectory())
    throw usageError(
      `${dst.kind === 'local' ? dst.path : '-'} is a file: a directory cannot be copied onto it`,
      'cp',
    );
  const res = await client.call('GET', sessionPath(src.id, 'artifacts'), {
    query: { path: src.path || undefined },
  });
  if (dst.kind === 'stdio') return toStdout(res);
  const root = local && !src.contents ? join(dst.path, posix.basename(src.path)) : dst.path;
  await extractTree(bodyOf(res), { root, prefix: src.path, id: src.id }, report);
}

async function downloadFile(
  client: GatewayClient,
  file: { src: SessionEnd; entry: FileEntry; dst: OtherEnd },
  report: Report,
): Promise<void> {
  const { src, entry, dst } = file;
  let target: string | undefined;
  if (dst.kind === 'local') {
    const local = await localStat(dst.path);
    if (!local && dst.path.endsWith('/'))
      throw new AppError('NOT_FOUND', `no local directory ${dst.path}`, { hint: 'make it first' });
    target = local?.isDirectory() ? join(dst.path, posix.basename(src.path)) : dst.path;
  }
  const res = await client.call('GET', sessionPath(src.id, 'files', encodePath(src.path)));
  if (target === undefined) return toStdout(res);
  const bytes = await writeAtomically(target, bodyOf(res), {
    mode: parseInt(entry.mode, 8),
    mtime: entry.mtime,
  });
  report.copied.push({ from: `${src.id}:${src.path}`, to: target, bytes });
}

async function toStdout(res: Response): Promise<void> {
  await pipeline(bodyOf(res), process.stdout, { end: false });
}

/** Writes `data` to a temporary name beside `target` and renames it into place once complete. */
async function writeAtomically(
  target: string,
  data: AsyncIterable<Uint8Array>,
  meta: { mode: number; mtime: string | Date },
): Promise<number> {
  const part = join(dirname(target), `.${basename(target)}.sandpit-${randomBytes(4).toString('hex')}.part`);
  let bytes = 0;
  async function* counted(): AsyncIterable<Uint8Array> {
    for await (const chunk of data) {
      bytes += chunk.length;
      yield chunk;
    }
  }
  try {
    await pipeline(counted(), createWriteStream(part, { mode: (meta.mode & 0o777) | 0o600, flags: 'wx' }));
    const mtime = new Date(meta.mtime);
    if (!Number.isNaN(mtime.getTime())) await utimes(part, mtime, mtime);
    await rename(part, target);
    return bytes;
  } catch (e) {
    await rm(part, { force: true });
    if (isAppError(e)) throw e;
    throw new AppError('INVALID_REQUEST', `cannot write ${target}: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * The artifacts tar of `prefix` extracted under `root`: its entries are workspace paths, each below
 * `prefix`. An entry that would land outside `root`, or is neither a file nor a directory, is a
 * gateway that broke its contract, and stops the copy.
 */
async function extractTree(
  tar: Readable,
  where: { root: string; prefix: string; id: string },
  report: Report,
): Promise<void> {
  await mkdir(where.root, { recursive: true });
  const archive = extract();
  // Iterated from the moment it is fed: an entry it meets with nobody listening is never handed on.
  const entries = archive[Symbol.asyncIterator]();
  const feeding = pipeline(tar, archive);
  try {
    for await (const entry of { [Symbol.asyncIterator]: () => entries }) {
      const { header } = entry;
      const rel = relativeEntry(header.name, where.prefix);
      const kind =
        header.type === 'directory' ? 'directory' : header.type === 'file' && rel ? 'file' : undefined;
      if (rel === undefined || kind === undefined) {
        throw new AppError(
          'BACKEND_ERROR',
          `the artifacts archive holds ${JSON.stringify(header.name)} (${header.type}), which is not below ${where.prefix || 'the workspace'} or not a file or directory`,
        );
      }
      const target = join(where.root, rel);
      if (kind === 'directory') {
        await mkdir(target, { recursive: true, mode: (header.mode & 0o777) | 0o700 });
        entry.resume();
        continue;
      }
      await mkdir(dirname(target), { recursive: true });
      const bytes = await writeAtomically(target, entry as AsyncIterable<Uint8Array>, {
        mode: header.mode,
        mtime: header.mtime,
      });
      report.copied.push({ from: `${where.id}:${header.name}`, to: target, bytes });
    }
  } catch (e) {
    archive.destroy();
    await feeding.catch(() => undefined);
    throw e;
  }
  await feeding.catch((e: unknown) => {
    throw new AppError('BACKEND_ERROR', `the artifacts download broke: ${(e as Error).message}`, {
      cause: e,
    });
  });
}

/** A tar entry's path below `prefix` (relative, normalised, no ..); '' for `prefix` itself. */
export function relativeEntry(name: string, prefix: string): string | undefined {
  const path = toWorkspacePath(name);
  if (path === undefined || name.startsWith('/')) return undefined;
  if (prefix === '') return path;
  if (path === prefix) return '';
  return path.startsWith(`${prefix}/`) ? path.slice(prefix.length + 1) : undefined;
}
