/**
 * The output files a runner returns in-band (protocol 5: 'P' header, 'D' data, 'S' skip frames),
 * put back together and checked: the sandbox is never trusted, so a path the gateway could not
 * carry safely is refused, and the caps the job set hold here too (a runner past them has broken
 * the protocol). Memory is bounded by the caps.
 */
import type { OutputCaps, OutputSkip, SkipReason } from '../api/outputs.js';
import { isSafeRelativePath } from '../api/run.js';

export interface ReturnedFile {
  path: string;
  data: Buffer;
}

export interface ReturnedOutputs {
  files: ReturnedFile[];
  skipped: OutputSkip[];
}

/** Skips kept at most: the runner names 64 one by one and counts the rest by reason. */
const MAX_SKIPS = 128;
const MAX_TEXT = 1024;

const strict = new TextDecoder('utf-8', { fatal: true });
const lenient = new TextDecoder('utf-8', { fatal: false });

/** Text from the sandbox, shown to a model: bounded, no control characters. */
function shown(bytes: Buffer): string {
  // eslint-disable-next-line no-control-regex
  return lenient.decode(bytes.subarray(0, MAX_TEXT)).replace(/[\u0000-\u001f\u007f]/g, '\uFFFD');
}

export class OutputFilesReader {
  private readonly caps: Pick<OutputCaps, 'maxFiles' | 'maxBytes'>;
  private readonly files: ReturnedFile[] = [];
  private readonly skipped: OutputSkip[] = [];
  /** The file coming in: its bytes land in `data`, of the size its header announced (within the caps). */
  private current:
    { path: string | undefined; size: number; data: Buffer | undefined; got: number } | undefined;
  private bytes = 0;

  constructor(caps: Pick<OutputCaps, 'maxFiles' | 'maxBytes'>) {
    this.caps = caps;
  }

  /** A file starts. Throws when the runner breaks the protocol or its caps. */
  start(rawPath: Buffer, size: number): void {
    if (this.current) throw new Error('a file frame before the last file was complete');
    if (this.files.length >= this.caps.maxFiles) throw new Error('more files than the job allows');
    if (this.bytes + size > this.caps.maxBytes) throw new Error('more file bytes than the job allows');
    this.bytes += size;
    const path = safePath(rawPath);
    const data = path === undefined ? undefined : Buffer.allocUnsafeSlow(size);
    this.current = { path, size, data, got: 0 };
    if (path === undefined) {
      this.skipped.push({
        entry: shown(rawPath),
        reason: 'NameNotAllowed',
        message: 'the sandbox returned a path that is not a safe relative UTF-8 path',
      });
    }
    this.completeIfDone();
  }

  data(chunk: Buffer): void {
    const file = this.current;
    if (!file) throw new Error('file data outside a file');
    if (file.got + chunk.length > file.size) throw new Error('more file data than the file header said');
    file.data?.set(chunk, file.got);
    file.got += chunk.length;
    this.completeIfDone();
  }

  skip(reason: SkipReason, entry: Buffer, message: Buffer): void {
    if (this.skipped.length >= MAX_SKIPS) return;
    this.skipped.push({ entry: shown(entry), reason, message: shown(message) });
  }

  /** What came back; a file cut off before its end is named, not returned. */
  finish(): ReturnedOutputs {
    const cut = this.current;
    if (cut) {
      this.current = undefined;
      this.skipped.push({
        entry: cut.path ?? '(unnamed)',
        reason: 'Unreadable',
        message: `the sandbox ended after ${cut.got} of its ${cut.size} bytes`,
      });
    }
    return { files: [...this.files], skipped: [...this.skipped] };
  }

  private completeIfDone(): void {
    const file = this.current;
    if (!file || file.got < file.size) return;
    this.current = undefined;
    if (file.path !== undefined && file.data) this.files.push({ path: file.path, data: file.data });
  }
}

function safePath(raw: Buffer): string | undefined {
  let path: string;
  try {
    path = strict.decode(raw);
  } catch {
    return undefined;
  }
  return isSafeRelativePath(path) ? path : undefined;
}
