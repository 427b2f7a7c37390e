/**
 * The bounded output tail a status carries, read from the pod log once the pod has finished.
 * The log is read up to a byte limit; when the program wrote more than that, the tail is taken
 * from a second read of the last lines, and `bytes` says how much was counted. A run that asked
 * for output files has them at the end of its log (runner/files-block.ts): its log is read once,
 * whole (the runner bounds it: the output window, then the files within their cap), and the
 * output is what comes before them.
 */
import { SANDBOX_CONTAINER } from '../../api/v1alpha1/labels.js';
import type { RunOutput } from '../../api/v1alpha1/sandboxrun.js';
import type { KubeClient } from '../../kube/client.js';
import type { ExitReport } from '../../runner/protocol.js';
import { isNotFound } from '../../kube/errors.js';
import { TrailerFilter } from '../../runner/exit-trailer.js';
import { FilesBlockFilter, maxFilesBlockBytes, parseFilesBlock } from '../../runner/files-block.js';
import type { ReturnedOutputs } from '../../runner/output-files.js';
import type { OutputCaps } from '../../api/outputs.js';

export interface OutputLimits {
  /** Bytes of the tail kept in the status. */
  tailBytes: number;
  /** Bytes of log read at most. */
  readBytes: number;
}

const TAIL_LINES = 200;

/** The last `max` bytes of `text`, cut at a character boundary. Pure. */
export function lastBytes(text: string, max: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= max) return text;
  let start = buf.length - max;
  while (start < buf.length && (buf[start]! & 0xc0) === 0x80) start++;
  return buf.subarray(start).toString('utf8');
}

/** Control characters other than tab and newline would garble `kubectl get -o yaml`. Pure. */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\r\n/g, '\n').replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '\uFFFD');
}

/** Builds the status output from what was read. Pure. */
export function toRunOutput(
  log: string,
  capped: boolean,
  tailSource: string,
  limits: OutputLimits,
): RunOutput {
  const bytes = Buffer.byteLength(log, 'utf8');
  const tail = printable(lastBytes(tailSource, limits.tailBytes));
  const truncated = capped || Buffer.byteLength(tailSource, 'utf8') > limits.tailBytes;
  // No output, no tail: an empty string is not written (some apiservers read "" in a custom resource as null).
  return { ...(tail ? { tail } : {}), truncated, bytes };
}

/**
 * The output as the runner counted it: the runner forwards at most the run's output limit to the
 * log (head, a note, tail), so its exit report is what says how much the program wrote. Pure.
 */
export function withReportedBytes(output: RunOutput, report: ExitReport | undefined): RunOutput {
  const wrote = report ? report.stdoutBytes + report.stderrBytes : 0;
  return wrote > output.bytes ? { ...output, bytes: wrote, truncated: true } : output;
}

/** `log` without the exit trailer a pool pod's runner ends it with (exit-trailer.ts). Pure. */
export function withoutTrailer(log: string): string {
  const filter = new TrailerFilter();
  const head = filter.push(Buffer.from(log, 'utf8'));
  const { rest } = filter.end();
  return Buffer.concat([head, rest]).toString('utf8');
}

/** What a run that asked for files needs to read them from its log. */
export interface FilesRead {
  caps: Pick<OutputCaps, 'maxFiles' | 'maxBytes'>;
  /** The run's output limit: the runner writes at most this much of each stream to the log. */
  outputBytes: number;
}

/** The output before a log's files block, and the files in it (undefined when it has none, or a bad one). */
export function splitFiles(
  log: Buffer,
  files: FilesRead,
): { output: Buffer; files: ReturnedOutputs | undefined } {
  const filter = new FilesBlockFilter(maxFilesBlockBytes(files.caps.maxBytes));
  const output = Buffer.concat([filter.push(log), filter.end()]);
  const block = filter.blockBytesSeen();
  if (!block || filter.overflowed) return { output, files: undefined };
  try {
    return { output, files: parseFilesBlock(block, files.caps) };
  } catch {
    return { output, files: undefined };
  }
}

/** Reads a finished pod's whole log, its output and the files at its end; undefined when the pod is gone. */
export async function readOutputAndFiles(
  kube: KubeClient,
  pod: { namespace: string; name: string; trailer?: boolean },
  limits: OutputLimits,
  files: FilesRead,
): Promise<{ output: RunOutput; files: ReturnedOutputs | undefined } | undefined> {
  const ref = { namespace: pod.namespace, name: pod.name };
  const bound = 2 * files.outputBytes + 64 * 1024 + maxFilesBlockBytes(files.caps.maxBytes);
  try {
    const read = await kube.readPodLog(ref, { container: SANDBOX_CONTAINER, limitBytes: bound });
    const log = pod.trailer === true ? withoutTrailer(read) : read;
    const split = splitFiles(Buffer.from(log, 'utf8'), files);
    const text = split.output.toString('utf8');
    const head = split.output.subarray(0, limits.readBytes).toString('utf8');
    const capped = split.output.length >= limits.readBytes;
    return { output: toRunOutput(head, capped, text, limits), files: split.files };
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/**
 * Reads the finished pod's log; undefined when the pod is gone. A pool pod's log (`trailer`) ends
 * with the runner's exit trailer, which is not output.
 */
export async function readOutput(
  kube: KubeClient,
  pod: { namespace: string; name: string; trailer?: boolean },
  limits: OutputLimits,
): Promise<RunOutput | undefined> {
  const ref = { namespace: pod.namespace, name: pod.name };
  const trailer = pod.trailer === true;
  const clean = (text: string): string => (trailer ? withoutTrailer(text) : text);
  try {
    const read = await kube.readPodLog(ref, { container: SANDBOX_CONTAINER, limitBytes: limits.readBytes });
    const capped = Buffer.byteLength(read, 'utf8') >= limits.readBytes;
    const log = clean(read);
    const tailSource = capped
      ? clean(
          await kube.readPodLog(ref, {
            container: SANDBOX_CONTAINER,
            tailLines: TAIL_LINES,
            limitBytes: limits.readBytes,
          }),
        )
      : log;
    return toRunOutput(log, capped, tailSource, limits);
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}
