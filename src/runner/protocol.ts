/**
 * The wire protocol of `sandpit-runner` (images/runner/sandpit-runner.c), its one contract: a job
 * goes in as one frame, output and the exit status come back as frames (or, in --plain mode on
 * Kubernetes, the exit report goes to the termination log). Both backends, the warm pool and the
 * operator speak it.
 *
 * The program can write into the runner's stdout under gVisor (through /proc/1/fd/1), so every
 * frame after the job starts with the job's random key and is at most PIPE_BUF bytes long (one
 * write, never interleaved); whatever else arrives is skipped. See the runner's header comment.
 */
import { randomBytes } from 'node:crypto';
import * as z from 'zod';
import { SKIP_REASONS, type SkipReason } from '../api/outputs.js';
import type { EffectiveSpec } from '../policy/evaluate.js';

/**
 * The protocol version this code speaks; the runner announces its own in the ready frame (a
 * runner that announces none speaks version 1). Bump it, and the runner's, with every change.
 */
export const PROTOCOL_VERSION = 5;
/** The first runner that takes an egress proxy socket ('p'): a job with egress needs it. */
export const EGRESS_PROTOCOL_VERSION = 4;
/**
 * `--pool` (a Kubernetes pool pod, exit-trailer.ts) takes this protocol's job unchanged and adds
 * no frame: its only new output is the trailer, a mode chosen by the pod's command. A runner older
 * than the mode refuses the flag with its usage (exit 2), so such a pool pod fails visibly instead
 * of serving.
 */
/** The oldest runner this code accepts: the first whose frames carry the job's key. */
export const MIN_PROTOCOL_VERSION = 3;
/**
 * The first runner that collects output files ('g' and 'G' records; 'P', 'D' and 'S' frames). A
 * job with outputs goes only to a runner that announces it: an older one would refuse the record.
 * (5, not 4: the egress branch's runner announces 4 for its own record, without these.)
 */
export const OUTPUTS_PROTOCOL_VERSION = 5;

/** Where every sandbox image keeps the runner (images/build.sh and the Dockerfile put it there). */
export const RUNNER_PATH = '/usr/local/bin/sandpit-runner';

/**
 * The flags of a pool's runner that waits for its job: it starts the job's interpreter meanwhile,
 * with these variables (the pool's template's), when the image has a preloader for it
 * (`--preload`, images/runner/sandpit-runner.c). A job with other variables gets a fresh one.
 */
export const preloadFlags = (env: readonly { name: string; value: string }[]): string[] => [
  '--preload',
  ...env.flatMap((e) => ['--env', `${e.name}=${e.value}`]),
];

/**
 * Egress on Docker: the directory the egress proxy's socket is mounted at inside a sandbox, the
 * socket in it, and the loopback port the runner forwards to it (images/runner/egress.h), where
 * HTTP_PROXY points.
 */
export const EGRESS_SOCKET_DIR = '/run/sandpit-egress';
export const EGRESS_SOCKET_PATH = `${EGRESS_SOCKET_DIR}/proxy.sock`;
export const EGRESS_LOCAL_PORT = 3128;

/** The variables that point a program at the egress proxy. */
export const EGRESS_PROXY_VARS = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'] as const;
export const NO_PROXY_VALUE = 'localhost,127.0.0.1,::1';
/**
 * Kubernetes: what the runner passes on to the program from its pod's environment (the proxy
 * variables from the sandbox's Secret), when a job or a session's open names them ('v').
 */
export const EGRESS_ENV_NAMES: readonly string[] = [...EGRESS_PROXY_VARS, 'NO_PROXY', 'no_proxy'];

const MAGIC = Buffer.from('SPJ3');
export const KEY_BYTES = 16;
/** PIPE_BUF: the largest write a pipe keeps whole; a keyed frame never exceeds it. */
const RECORD_MAX = 4096;
const RECORD_HEAD = KEY_BYTES + 3;
/** The most payload one keyed frame carries; a longer chunk or tail comes as several. */
export const RECORD_DATA = RECORD_MAX - RECORD_HEAD;
/**
 * A collected file's data frame ('D', protocol 5) may carry up to the u16 length: the runner writes
 * them only once no process of the program is left, so they need not fit PIPE_BUF.
 */
export const FILE_RECORD_DATA = 0xffff;
/** Frames before the job (ready, a failure to read it) are small. */
const MAX_UNKEYED_FRAME = 4096;
/** The key of a job whose runner frames nothing (`--plain`, where the pod log is the output). */
const NO_KEY = Buffer.alloc(KEY_BYTES);

/** A fresh key for one job's frames. */
export function newChannelKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

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

export interface JobOptions {
  /** Starts every frame after the job: a fresh one per job (`newChannelKey()`); none for `--plain`. */
  key?: Buffer;
  /**
   * Whether the runner refuses the job when the sandbox has a network interface besides lo, so
   * that egress none fails closed (default true). Off only where something else is known to cut
   * the network off (a cluster that enforces NetworkPolicy).
   */
  requireNoNetwork?: boolean;
  /**
   * The egress proxy's socket inside the sandbox (Docker, a job with an allowlist): the runner
   * forwards 127.0.0.1:EGRESS_LOCAL_PORT to it and sets the proxy variables.
   */
  egressSocket?: string | undefined;
  /**
   * Variables of the runner's own environment the program gets too, unless the job sets them
   * (Kubernetes: the proxy variables a pod gets from its run's Secret; protocol 4).
   */
  inheritEnv?: readonly string[] | undefined;
}

/** Encodes the job for one run. The deadline is counted by the runner from the moment it reads the job. */
export function encodeJob(spec: EffectiveSpec, options: JobOptions = {}): Buffer {
  const key = options.key ?? NO_KEY;
  if (key.length !== KEY_BYTES) throw new Error(`a channel key has ${KEY_BYTES} bytes`);
  const { headBytes, tailBytes } = outputWindow(spec.limits.outputBytes);
  const parts: Buffer[] = [
    ...spec.argv.map((a) => record('a', Buffer.from(a))),
    ...spec.env.map((e) => record('e', Buffer.from(`${e.name}=${e.value}`))),
    record('w', Buffer.from(spec.workdir)),
    record('t', u32(spec.limits.timeoutSeconds * 1000)),
    record('o', u32(headBytes, tailBytes)),
    record(
      'l',
      u32(
        Math.floor(spec.limits.fileSizeBytes / 2 ** 32),
        spec.limits.fileSizeBytes % 2 ** 32,
        spec.limits.openFiles,
      ),
    ),
    ...(options.requireNoNetwork === false ? [] : [record('n', Buffer.alloc(0))]),
    ...(options.egressSocket ? [record('p', Buffer.from(options.egressSocket))] : []),
    ...(options.inheritEnv ?? []).map((name) => record('v', Buffer.from(name))),
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
  const { entries, caps } = spec.outputs;
  if (entries.length > 0) {
    parts.push(...entries.map((e) => record('g', Buffer.from(e))));
    parts.push(record('G', u32(caps.maxFiles, caps.maxBytes)));
  }
  const body = Buffer.concat(parts);
  return Buffer.concat([MAGIC, key, u32(body.length), body]);
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

/** The runner's own failure in --plain mode (the termination log): the job never ran. */
const RunnerFailureSchema = z.object({ failure: z.string() });

/** The runner's failure message from a termination log, when that is what it holds. */
export function parseRunnerFailure(text: string): string | undefined {
  try {
    const parsed = RunnerFailureSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data.failure : undefined;
  } catch {
    return undefined;
  }
}

/** How the runner words its refusal of a job whose sandbox has a network (the 'n' record). */
const NETWORK_REFUSAL = /^network interface (\S{1,15}) exists although egress is none/;

/** The interface the runner found, when `failure` is its refusal of a sandbox with a network. */
export function networkRefusal(failure: string): string | undefined {
  return NETWORK_REFUSAL.exec(failure)?.[1];
}

export type Frame =
  | { type: 'ready'; version: number }
  | { type: 'stdout' | 'stderr'; data: Buffer }
  | { type: 'tail'; stream: 'stdout' | 'stderr'; data: Buffer }
  | { type: 'exit'; report: ExitReport }
  | { type: 'failure'; message: string }
  | { type: 'file'; path: Buffer; size: number }
  | { type: 'file-data'; data: Buffer }
  | { type: 'skip'; reason: SkipReason; entry: Buffer; message: Buffer };

/**
 * Incremental decoder of runner frames, linear in the bytes pushed: it holds at most one partial
 * frame, as the chunks it came in, and joins them once the frame is whole (a file's data frame,
 * up to 64 KiB, may come in many small chunks). Before `expectKey()` it reads the runner's unkeyed
 * frames (the ready frame); after it, only frames that start with the key, skipping (and counting)
 * every other byte. It throws on a malformed frame of the runner's own (never trusts the sandbox).
 */
export class FrameDecoder {
  /** The bytes not decoded yet: a copy of what was left of the last decoded chunk, then chunks as pushed. */
  private parts: Buffer[] = [];
  private held = 0;
  /** How many bytes must be held before decoding can get further (the partial frame's length). */
  private wanted = 0;
  private key: Buffer | undefined;
  /** Bytes on the channel that were not the runner's frames (a program writing into it). */
  skippedBytes = 0;

  /** From now on, a frame counts only if it starts with `key`. */
  expectKey(key: Buffer): void {
    this.key = key;
    this.wanted = 0;
  }

  push(chunk: Buffer): Frame[] {
    this.parts.push(chunk);
    this.held += chunk.length;
    if (this.held < this.wanted) return [];
    const buf = this.parts.length === 1 ? chunk : Buffer.concat(this.parts, this.held);
    const frames: Frame[] = [];
    const { used, wanted } = this.key ? this.keyed(buf, this.key, frames) : this.unkeyed(buf, frames);
    // A copy: a small remainder must not keep a large chunk alive.
    this.parts = used < buf.length ? [Buffer.from(buf.subarray(used))] : [];
    this.held = buf.length - used;
    this.wanted = wanted;
    return frames;
  }

  get pendingBytes(): number {
    return this.held;
  }

  /** Decodes whole frames from the start of `buf`: the bytes used, and how many the next frame needs. */
  private unkeyed(buf: Buffer, frames: Frame[]): { used: number; wanted: number } {
    let off = 0;
    while (buf.length - off >= 5) {
      const len = buf.readUInt32BE(off + 1);
      if (len > MAX_UNKEYED_FRAME) throw new Error(`runner frame of ${len} bytes is too large`);
      if (buf.length - off - 5 < len) return { used: off, wanted: 5 + len };
      frames.push(decodeFrame(String.fromCharCode(buf[off]!), buf.subarray(off + 5, off + 5 + len)));
      off += 5 + len;
    }
    return { used: off, wanted: 5 };
  }

  private keyed(buf: Buffer, key: Buffer, frames: Frame[]): { used: number; wanted: number } {
    let off = 0;
    for (;;) {
      const at = buf.indexOf(key, off);
      if (at < 0) {
        // Keep what could be the start of a key cut off by the chunk's end.
        const keep = Math.min(buf.length - off, KEY_BYTES - 1);
        this.skippedBytes += buf.length - off - keep;
        return { used: buf.length - keep, wanted: 0 };
      }
      this.skippedBytes += at - off;
      if (buf.length - at < RECORD_HEAD) return { used: at, wanted: RECORD_HEAD };
      const len = buf.readUInt16BE(at + KEY_BYTES + 1);
      const type = String.fromCharCode(buf[at + KEY_BYTES]!);
      if (len > (type === 'D' ? FILE_RECORD_DATA : RECORD_DATA)) {
        throw new Error(`runner frame of ${len} bytes is too large`);
      }
      if (buf.length - at - RECORD_HEAD < len) return { used: at, wanted: RECORD_HEAD + len };
      const data = buf.subarray(at + RECORD_HEAD, at + RECORD_HEAD + len);
      frames.push(decodeFrame(type, data));
      off = at + RECORD_HEAD + len;
    }
  }
}

function decodeSkip(data: Buffer): Frame {
  const reason = SKIP_REASONS[(data[0] ?? 0) - 1];
  if (data.length < 3 || !reason) throw new Error('malformed skip frame');
  const entryBytes = data.readUInt16BE(1);
  if (3 + entryBytes > data.length) throw new Error('skip frame entry overruns it');
  return {
    type: 'skip',
    reason,
    entry: data.subarray(3, 3 + entryBytes),
    message: data.subarray(3 + entryBytes),
  };
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
    case 'P':
      if (data.length < 4) throw new Error('file frame of fewer than 4 bytes');
      return { type: 'file', size: data.readUInt32BE(0), path: data.subarray(4) };
    case 'D':
      return { type: 'file-data', data };
    case 'S':
      return decodeSkip(data);
    default:
      throw new Error(`unknown runner frame type 0x${type.charCodeAt(0).toString(16)}`);
  }
}
