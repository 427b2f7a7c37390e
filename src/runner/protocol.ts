/**
 * The wire protocol of `sandpit-runner` (images/runner/sandpit-runner.c), its one contract: a job
 * goes in as one frame, output and the exit status come back as frames (or, in --plain mode on
 * Kubernetes, the exit report goes to the termination log). Both backends, the warm pool and the
 * operator speak it.
 */
import * as z from 'zod';
import type { EffectiveSpec } from '../policy/evaluate.js';

/**
 * The protocol version this code speaks; the runner announces its own in the ready frame (a
 * runner that announces none speaks version 1). Bump it, and the runner's, with every change.
 */
export const PROTOCOL_VERSION = 2;
/** The oldest runner this code accepts. */
export const MIN_PROTOCOL_VERSION = 2;

/** Where every sandbox image keeps the runner (images/build.sh and the Dockerfile put it there). */
export const RUNNER_PATH = '/usr/local/bin/sandpit-runner';

const MAGIC = Buffer.from('SPJ1');

function record(type: string, data: Buffer): Buffer {
  const hdr = Buffer.alloc(5);
  hdr.write(type, 0, 'latin1');
  hdr.writeUInt32BE(data.length, 1);
  return Buffer.concat([hdr, data]);
}

const u32 = (...values: number[]): Buffer => {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeUInt32BE(v, 4 * i));
  return b;
};

export interface OutputWindow {
  /** Bytes of each stream forwarded live. */
  headBytes: number;
  /** Bytes of each stream kept from the end once the head is used up. */
  tailBytes: number;
}

/** Splits an output limit into the live head and the kept tail. */
export function outputWindow(outputBytes: number): OutputWindow {
  const headBytes = Math.ceil(outputBytes / 2);
  return { headBytes, tailBytes: outputBytes - headBytes };
}

/** Encodes the job for one run. The deadline is counted by the runner from the moment it reads the job. */
export function encodeJob(spec: EffectiveSpec): Buffer {
  const { headBytes, tailBytes } = outputWindow(spec.limits.outputBytes);
  const parts: Buffer[] = [
    ...spec.argv.map((a) => record('a', Buffer.from(a))),
    ...spec.env.map((e) => record('e', Buffer.from(`${e.name}=${e.value}`))),
    record('w', Buffer.from(spec.workdir)),
    record('t', u32(spec.limits.timeoutSeconds * 1000)),
    record('o', u32(headBytes, tailBytes)),
  ];
  for (const f of spec.files) {
    const path = Buffer.from(f.path);
    const head = Buffer.alloc(3);
    head.writeUInt8(f.executable ? 1 : 0, 0);
    head.writeUInt16BE(path.length, 1);
    parts.push(record('f', Buffer.concat([head, path, f.content])));
  }
  if (spec.code) parts.push(record('c', spec.code.content));
  if (spec.stdin.length > 0) parts.push(record('i', spec.stdin));
  const body = Buffer.concat(parts);
  return Buffer.concat([MAGIC, u32(body.length), body]);
}

const count = z.number().int().min(0).default(0);

/** The runner's exit report ('X' frame, or the termination log in --plain mode). */
export const ExitReportSchema = z.object({
  exitCode: z.number().int(),
  signal: count,
  timedOut: z.boolean().default(false),
  oomKilled: z.boolean().default(false),
  stdoutBytes: count,
  stderrBytes: count,
  durationMs: z.number().min(0).default(0),
});
export type ExitReport = z.infer<typeof ExitReportSchema>;

/** Parses an exit report; throws on anything that is not one (the sandbox is never trusted). */
export function parseExitReport(text: string): ExitReport {
  return ExitReportSchema.parse(JSON.parse(text));
}

export type Frame =
  | { type: 'ready'; version: number }
  | { type: 'stdout' | 'stderr'; data: Buffer }
  | { type: 'tail'; stream: 'stdout' | 'stderr'; data: Buffer }
  | { type: 'exit'; report: ExitReport }
  | { type: 'failure'; message: string };

/** Largest frame we accept from a sandbox: a chunk is at most 64 KiB, a tail at most the output limit. */
const MAX_FRAME = 64 * 1024 * 1024;

/** Incremental decoder of runner frames; throws on anything malformed (never trusts the sandbox). */
export class FrameDecoder {
  private buffered: Buffer[] = [];
  private size = 0;

  push(chunk: Buffer): Frame[] {
    this.buffered.push(chunk);
    this.size += chunk.length;
    const frames: Frame[] = [];
    let buf = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered);
    let off = 0;
    while (buf.length - off >= 5) {
      const len = buf.readUInt32BE(off + 1);
      if (len > MAX_FRAME) throw new Error(`runner frame of ${len} bytes is too large`);
      if (buf.length - off - 5 < len) break;
      frames.push(decodeFrame(String.fromCharCode(buf[off]!), buf.subarray(off + 5, off + 5 + len)));
      off += 5 + len;
    }
    buf = buf.subarray(off);
    this.buffered = buf.length ? [buf] : [];
    this.size = buf.length;
    return frames;
  }

  get pendingBytes(): number {
    return this.size;
  }
}

function decodeFrame(type: string, data: Buffer): Frame {
  switch (type) {
    case 'R':
      return { type: 'ready', version: data.length >= 4 ? data.readUInt32BE(0) : 1 };
    case 'O':
      return { type: 'stdout', data };
    case 'E':
      return { type: 'stderr', data };
    case 'T':
      return { type: 'tail', stream: data[0] === 2 ? 'stderr' : 'stdout', data: data.subarray(1) };
    case 'X':
      return { type: 'exit', report: parseExitReport(data.toString('utf8')) };
    case 'F':
      return { type: 'failure', message: data.toString('utf8') };
    default:
      throw new Error(`unknown runner frame type 0x${type.charCodeAt(0).toString(16)}`);
  }
}
