/**
 * The exit trailer of `sandpit-runner --pool` (a pool pod on Kubernetes): the program's output goes
 * to the pod log plain, as a cold run's does, and the runner ends it with one line that reports how
 * the job ended, so that the operator, attached to the pod, has the result at once (the v1.20
 * kubelet reports a container's end only at its next relist, once a second):
 *
 *     "\n" RS "sandpit-exit " <the job's key, 32 hex digits> " " <JSON> "\n"
 *
 * The JSON is the exit report, or `{"failure": text}` when the job never ran. The line is written
 * in one write() of at most PIPE_BUF bytes, after the last of the program's output, so `kubectl
 * logs` shows the program's stdout and then this line. The program's last stderr bytes may come
 * after it: the kubelet reads the two streams on their own. The program cannot forge it: it never
 * learns the key before the line is written. The leading newline is always there, so that removing
 * the trailer gives back exactly the bytes the program wrote.
 *
 * TrailerFilter removes it from a stream (the attach's stdout, or the followed pod log): it holds
 * back only what could still be the trailer, and drops it once the stream ends with one (and the
 * kubelet's error that may follow it; stderr's bytes after it are output: MAX_AFTER_BYTES). Pure.
 */
import { ExitReportSchema, KEY_BYTES, type ExitReport } from './protocol.js';
import * as z from 'zod';

const RS = '\x1e';
const START = Buffer.from(`\n${RS}sandpit-exit `, 'latin1');
/** A trailer is one write of at most PIPE_BUF bytes. */
export const MAX_TRAILER_BYTES = 4096;
// eslint-disable-next-line no-control-regex -- RS starts the trailer line
const TRAILER = /^\n\x1esandpit-exit ([0-9a-f]{32}) (\{[^\n]*\})\n$/;

export type TrailerEnd = { kind: 'exit'; report: ExitReport } | { kind: 'failure'; message: string };

const FailureSchema = z.object({ failure: z.string() });

/** The trailer line for `key` (the runner writes it; tests build it here). */
export function encodeTrailer(key: Buffer, end: TrailerEnd): Buffer {
  const json = JSON.stringify(end.kind === 'exit' ? end.report : { failure: end.message });
  return Buffer.from(`${START.toString('latin1')}${key.toString('hex')} ${json}\n`, 'utf8');
}

/**
 * The end a trailer reports, when `bytes` is one; with `key`, only a trailer carrying that key
 * (the operator's check), without it any well-formed trailer (the gateway, which never holds the
 * key, only removes the line from the output it shows).
 */
export function parseTrailer(bytes: Buffer, key?: Buffer): TrailerEnd | undefined {
  if (bytes.length > MAX_TRAILER_BYTES) return undefined;
  const m = TRAILER.exec(bytes.toString('utf8'));
  if (!m) return undefined;
  if (key && (key.length !== KEY_BYTES || m[1] !== key.toString('hex'))) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(m[2]!);
  } catch {
    return undefined;
  }
  const failure = FailureSchema.safeParse(json);
  if (failure.success) return { kind: 'failure', message: failure.data.failure };
  const report = ExitReportSchema.safeParse(json);
  return report.success ? { kind: 'exit', report: report.data } : undefined;
}

/**
 * What may follow the trailer in a pod log: the program's last stderr bytes (the kubelet reads
 * stdout and stderr on their own), kept as output; and, in a followed log, the v1.20 kubelet's
 * error, written into the stream when the container is removed while it follows it (a pool pod
 * goes as soon as its run ends): "rpc error: code = NotFound desc = … not found". Not the
 * program's: dropped, from its start.
 */
const MAX_AFTER_BYTES = 4096;
const KUBELET_ERROR = Buffer.from('rpc error: code = ', 'latin1');

/** The trailer line `held` starts with (through its newline), when it starts with a whole line. */
function firstLine(held: Buffer): Buffer | undefined {
  const nl = held.indexOf(0x0a, 1);
  return nl < 0 ? undefined : held.subarray(0, nl + 1);
}

/**
 * Whether `held` could still grow into the stream's end: a prefix of START, or START and one line
 * being written, or a whole trailer and after it no more than the kubelet appends (no other
 * trailer's start: the runner's is the last).
 */
function couldBeTrailer(held: Buffer): boolean {
  const n = Math.min(held.length, START.length);
  if (!held.subarray(0, n).equals(START.subarray(0, n))) return false;
  const line = firstLine(held);
  if (!line) return held.length <= MAX_TRAILER_BYTES;
  if (line.length === held.length) return line.length <= MAX_TRAILER_BYTES;
  return (
    held.length - line.length <= MAX_AFTER_BYTES &&
    held.indexOf(START, line.length - 1) < 0 &&
    parseTrailer(line) !== undefined
  );
}

/**
 * Removes the trailer from the end of a stream. push() returns the bytes that are surely output;
 * end() returns the rest of the output and the trailer's end, when the stream ended with one.
 * With `key`, a trailer is the runner's only when it carries the key (anything else is output).
 */
export class TrailerFilter {
  private held: Buffer = Buffer.alloc(0);
  private readonly key: Buffer | undefined;

  constructor(key?: Buffer) {
    this.key = key;
  }

  push(chunk: Buffer): Buffer {
    const data = this.held.length ? Buffer.concat([this.held, chunk]) : chunk;
    // The trailer starts at a newline near the end: hold back from the first one that could start
    // it (a trailer has no other newline but its last byte).
    let at = data.indexOf(0x0a, Math.max(0, data.length - MAX_TRAILER_BYTES - MAX_AFTER_BYTES));
    while (at >= 0 && !couldBeTrailer(data.subarray(at))) at = data.indexOf(0x0a, at + 1);
    if (at < 0) {
      this.held = Buffer.alloc(0);
      return data;
    }
    this.held = Buffer.from(data.subarray(at));
    return data.subarray(0, at);
  }

  /** Bytes held back that may be the trailer. */
  get heldBytes(): number {
    return this.held.length;
  }

  /**
   * The end the held bytes report when they are a whole trailer now (a reader that stays attached
   * knows the result without waiting for the stream to end); they stay held.
   */
  complete(): TrailerEnd | undefined {
    const line = this.held.length > START.length ? firstLine(this.held) : undefined;
    return line ? parseTrailer(line, this.key) : undefined;
  }

  /**
   * The rest of the output, and the trailer's end when the stream ended with one: what followed
   * the trailer is output, up to the kubelet's error.
   */
  end(): { rest: Buffer; end: TrailerEnd | undefined } {
    const held = this.held;
    this.held = Buffer.alloc(0);
    const line = firstLine(held);
    const end = line ? parseTrailer(line, this.key) : undefined;
    if (!line || !end) return { rest: held, end: undefined };
    const after = held.subarray(line.length);
    const kubelet = after.indexOf(KUBELET_ERROR);
    return { rest: kubelet < 0 ? after : after.subarray(0, kubelet), end };
  }
}
