/**
 * Output files in a pod log (protocol 5, `--plain` and `--pool` on Kubernetes): the runner
 * collects them as it does for a framed job (images/runner/outputs.c), once the program and
 * whatever it left are gone and its output is written, and writes them after that output, before a
 * pool pod's exit trailer, as one block of text lines:
 *
 *     "\n" RS "sandpit-files\n"
 *     RS "F " <size> " " <base64 path> "\n"   then the file's bytes in base64, 76 characters a line
 *     RS "S " <reason 1-8> " " <base64 entry> " " <base64 message> "\n"   (an entry or file not collected)
 *     RS "sandpit-files-end\n"
 *
 * The log is the only way out of a plain pod that has no credentials, and the block keeps the pod's
 * life as it is (the pod ends with its program). The operator takes the block from the log (or the
 * attach stream) and keeps the files in an owned ConfigMap; the output a caller sees ends where the
 * block starts (FilesBlockFilter). A program could print such a block itself: what it would forge
 * is what it could write to its workspace anyway, and the caps and path checks hold for it too. The
 * last block in the log is taken: the runner writes its own after everything the program wrote.
 */
import { SKIP_REASONS, type OutputCaps } from '../api/outputs.js';
import { OutputFilesReader, type ReturnedOutputs } from './output-files.js';

const RS = '\x1e';
export const FILES_BLOCK_START = Buffer.from(`\n${RS}sandpit-files\n`, 'latin1');
const END_LINE = `${RS}sandpit-files-end`;
const LINE = 76;

/** The block for `outputs`, as the runner writes it (tests build logs with it). */
export function encodeFilesBlock(outputs: ReturnedOutputs): Buffer {
  const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
  const lines: string[] = [];
  for (const f of outputs.files) {
    lines.push(`${RS}F ${f.data.length} ${b64(f.path)}`);
    const data = f.data.toString('base64');
    for (let i = 0; i < data.length; i += LINE) lines.push(data.slice(i, i + LINE));
  }
  for (const s of outputs.skipped) {
    lines.push(`${RS}S ${SKIP_REASONS.indexOf(s.reason) + 1} ${b64(s.entry)} ${b64(s.message)}`);
  }
  return Buffer.concat([FILES_BLOCK_START, Buffer.from(`${[...lines, END_LINE].join('\n')}\n`, 'latin1')]);
}

/**
 * The files of a block (the bytes after its start line). Throws when it is not one the runner
 * writes, or breaks the caps (the sandbox is never trusted).
 */
export function parseFilesBlock(
  block: Buffer,
  caps: Pick<OutputCaps, 'maxFiles' | 'maxBytes'>,
): ReturnedOutputs {
  const files = new OutputFilesReader(caps);
  const lines = block.toString('latin1').split('\n');
  let i = 0;
  const next = (): string => {
    if (i >= lines.length) throw new Error('the file block ends early');
    return lines[i++]!;
  };
  for (;;) {
    const line = next();
    if (line === END_LINE) return files.finish();
    const fields = line.split(' ');
    if (fields[0] === `${RS}F` && fields.length === 3) {
      const size = Number(fields[1]);
      if (!Number.isSafeInteger(size) || size < 0) throw new Error('a file with a bad size');
      files.start(base64(fields[2]!), size);
      let text = '';
      while (text.length < 4 * Math.ceil(size / 3)) text += next();
      if (size > 0) files.data(base64(text));
    } else if (fields[0] === `${RS}S` && fields.length === 4) {
      const reason = SKIP_REASONS[Number(fields[1]) - 1];
      if (!reason) throw new Error('a skip with an unknown reason');
      files.skip(reason, base64(fields[2]!), base64(fields[3]!));
    } else {
      throw new Error('a line that is not the runner’s');
    }
  }
}

function base64(text: string): Buffer {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw new Error('not base64');
  return Buffer.from(text, 'base64');
}

/**
 * Splits a stream (a pod log, an attach's stdout) at the first block start: push() returns the
 * bytes that are surely output; the rest is the block, kept (up to `maxBlockBytes`) for block().
 * A stream that never has one is all output.
 */
export class FilesBlockFilter {
  private held: Buffer = Buffer.alloc(0);
  private inBlock = false;
  private block: Buffer[] = [];
  private blockBytes = 0;
  private readonly maxBlockBytes: number;

  constructor(maxBlockBytes = Infinity) {
    this.maxBlockBytes = maxBlockBytes;
  }

  push(chunk: Buffer): Buffer {
    if (this.inBlock) {
      this.keep(chunk);
      return Buffer.alloc(0);
    }
    const data = this.held.length ? Buffer.concat([this.held, chunk]) : chunk;
    const at = data.indexOf(FILES_BLOCK_START);
    if (at >= 0) {
      this.inBlock = true;
      this.held = Buffer.alloc(0);
      this.keep(data.subarray(at + FILES_BLOCK_START.length));
      return data.subarray(0, at);
    }
    // Hold back what could be the start of the block's first line.
    let keep = Math.min(data.length, FILES_BLOCK_START.length - 1);
    while (keep > 0 && !FILES_BLOCK_START.subarray(0, keep).equals(data.subarray(data.length - keep))) keep--;
    this.held = Buffer.from(data.subarray(data.length - keep));
    return data.subarray(0, data.length - keep);
  }

  /** The stream has ended: what was held back as a possible block start is output. */
  end(): Buffer {
    const rest = this.held;
    this.held = Buffer.alloc(0);
    return rest;
  }

  /** The bytes after the first block start, from the last block start among them (the runner's), when there was one. */
  blockBytesSeen(): Buffer | undefined {
    if (!this.inBlock) return undefined;
    const all = Buffer.concat(this.block);
    const last = all.lastIndexOf(FILES_BLOCK_START);
    return last >= 0 ? all.subarray(last + FILES_BLOCK_START.length) : all;
  }

  /** Whether the block was longer than `maxBlockBytes` (then it is cut, and does not parse). */
  get overflowed(): boolean {
    return this.blockBytes > this.maxBlockBytes;
  }

  private keep(data: Buffer): void {
    const room = this.maxBlockBytes - this.blockBytes;
    if (room > 0) this.block.push(Buffer.from(data.subarray(0, room)));
    this.blockBytes += data.length;
  }
}

/** The largest block for `maxBytes` of files: base64 with its line breaks, and room for names and skips. */
export function maxFilesBlockBytes(maxBytes: number): number {
  return Math.ceil((4 * Math.ceil(maxBytes / 3) * (LINE + 1)) / LINE) + 1024 * 1024;
}
