/**
 * A session's artifacts: one path of its workspace, or all of it, as a tar stream (tar-stream
 * packs it). Built on the port's list and read, so every backend's sessions get the same one:
 * regular files and directories only (a symlink or a FIFO in the workspace is not followed into
 * the archive), within a byte cap checked before the first byte goes out.
 */
import { once } from 'node:events';
import { pack as tarPack } from 'tar-stream';
import type { FileEntry } from '../api/session.js';
import { AppError } from '../shared/errors.js';
import type { FileRead } from './sessions.js';

export interface ArtifactSource {
  list(list: { path: string; recursive: boolean }): Promise<FileEntry[]>;
  readFile(read: { path: string; maxBytes: number }): Promise<FileRead>;
}

export interface ArtifactRequest {
  /** Workspace-relative; '' for the whole workspace. */
  path: string;
  /** The most file bytes the archive may hold (sandbox.maxDownloadBytes). */
  maxBytes: number;
}

export async function* artifactTar(source: ArtifactSource, request: ArtifactRequest): AsyncIterable<Buffer> {
  const entries = (await source.list({ path: request.path, recursive: true })).filter(
    (e) => e.type === 'file' || e.type === 'directory',
  );
  const total = entries.reduce((n, e) => n + (e.type === 'file' ? e.size : 0), 0);
  if (total > request.maxBytes) {
    const message = `the artifacts of ${JSON.stringify(request.path || '.')} hold ${total} bytes; at most ${request.maxBytes} are downloaded`;
    throw new AppError('TOO_LARGE', message, {
      violations: [{ field: 'path', message, limit: request.maxBytes, requested: total }],
    });
  }
  const archive = tarPack();
  const feeding = feed(source, archive, entries, request.maxBytes).then(
    () => archive.finalize(),
    (e: unknown) => archive.destroy(e instanceof Error ? e : new Error(String(e))),
  );
  try {
    for await (const chunk of archive) yield chunk as Buffer;
  } finally {
    archive.destroy();
    await feeding;
  }
}

async function feed(
  source: ArtifactSource,
  archive: ReturnType<typeof tarPack>,
  entries: FileEntry[],
  maxBytes: number,
): Promise<void> {
  let left = maxBytes;
  for (const e of entries) {
    const header = { name: e.path, mode: parseInt(e.mode, 8), mtime: new Date(e.mtime) };
    if (e.type === 'directory') {
      archive.entry({ ...header, type: 'directory' });
      continue;
    }
    // The size in the header is what the read found: a file that grew since the listing is read as it is now.
    const { entry, data } = await source.readFile({ path: e.path, maxBytes: left });
    left -= entry.size;
    const sink = archive.entry({ ...header, size: entry.size });
    for await (const chunk of data) if (!sink.write(chunk)) await once(sink, 'drain');
    sink.end(undefined);
    await once(sink, 'finish');
  }
}
