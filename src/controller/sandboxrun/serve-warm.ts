/**
 * serveWarm(): one SandboxRun served by the pool pod it claimed (contract §3.4): take the attach
 * held to the pod's runner (stdin, stdout, stderr), or open one, write the job with its fresh key
 * at once, and read the output through TrailerFilter(key) until the exit trailer. The result comes from the attach stream, not from the
 * pod's status (the v1.20 kubelet relists once a second). The output tail is the RunOutput a cold
 * run's pod log gives (both streams as they came, the same byte limits); the trailer is never part
 * of it. A serve that loses its attach before the trailer says so: the run is then followed through
 * its pod, as a new leader follows it.
 */
import type { RunOutput } from '../../api/v1alpha1/sandboxrun.js';
import type { AttachedPod } from '../../kube/attach.js';
import { TrailerFilter, type TrailerEnd } from '../../runner/exit-trailer.js';
import { outputWindow } from '../../runner/protocol.js';
import { FilesBlockFilter, maxFilesBlockBytes, parseFilesBlock } from '../../runner/files-block.js';
import type { ReturnedOutputs } from '../../runner/output-files.js';
import { toRunOutput, withReportedBytes, type FilesRead, type OutputLimits } from './read-output.js';

/** After the trailer, how long the last of stderr may still take to arrive (its own stream). */
const STDERR_GRACE_MS = 200;

export type WarmResult =
  | {
      state: 'done';
      end: TrailerEnd;
      output: RunOutput;
      finishedAt: string;
      /** The files the runner wrote after the output, when the run asked for some. */
      files?: ReturnedOutputs | undefined;
    }
  /** The attach ended before the trailer: the run is followed through its pod. */
  | { state: 'lost'; why: string; jobWritten: boolean };

export interface WarmTimings {
  /** The attach was held to the pod ahead of the claim (else it was opened for this run). */
  attachedAhead: boolean;
  /** The attach's set-up (the WebSocket to the kubelet through the apiserver), when opened for this run. */
  attachMs: number;
  /** From the job written to the trailer read. */
  jobToResultMs: number;
}

export interface WarmServe {
  readonly pod: { name: string; uid: string };
  /** The pool the pod came from. */
  readonly pool: string | undefined;
  /** When the pod was claimed: the job's start, from which the run's deadline counts. */
  readonly startedAt: string;
  /** Settles when the serve is over (never rejects). */
  readonly result: Promise<WarmResult>;
  /** Set once result settled. */
  readonly settled: WarmResult | undefined;
  readonly timings: Partial<WarmTimings>;
  /** When the job was written (ms since the epoch), once it was. */
  readonly jobWrittenAt: number | undefined;
  /** Stops the serve (cancel, deletion): the attach closes; the pod is deleted by the caller. */
  abort(): void;
}

/**
 * Both streams as they came, kept within the limits a cold run's log read has; a run's files
 * block, which the runner writes after everything else, is set apart (runner/files-block.ts).
 */
class OutputCollector {
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer = Buffer.alloc(0);
  private total = 0;
  private readonly limits: OutputLimits;
  private readonly files: { read: FilesRead; filter: FilesBlockFilter } | undefined;

  constructor(limits: OutputLimits, files: FilesRead | undefined) {
    this.limits = limits;
    this.files = files && {
      read: files,
      filter: new FilesBlockFilter(maxFilesBlockBytes(files.caps.maxBytes)),
    };
  }

  push(data: Buffer): void {
    this.keep(this.files ? this.files.filter.push(data) : data);
  }

  /** The files after the output, when the run asked for some (undefined: none came, or a bad block). */
  returnedFiles(): ReturnedOutputs | undefined {
    const block = this.files?.filter.blockBytesSeen();
    if (!this.files || !block || this.files.filter.overflowed) return undefined;
    try {
      return parseFilesBlock(block, this.files.read.caps);
    } catch {
      return undefined;
    }
  }

  private keep(data: Buffer): void {
    this.total += data.length;
    const room = this.limits.readBytes - this.headBytes;
    if (room > 0) {
      const part = data.subarray(0, room);
      this.head.push(part);
      this.headBytes += part.length;
    }
    // The tail a status keeps, plus room for a character cut at its start.
    const keep = this.limits.tailBytes + 4;
    const joined = Buffer.concat([this.tail, data]);
    this.tail = Buffer.from(joined.subarray(Math.max(0, joined.length - keep)));
  }

  output(): RunOutput {
    if (this.files) this.keep(this.files.filter.end());
    const log = Buffer.concat(this.head).toString('utf8');
    const capped = this.total >= this.limits.readBytes;
    return toRunOutput(log, capped, capped ? this.tail.toString('utf8') : log, this.limits);
  }
}

/** What the runner forwards of a stream the program wrote `bytes` to: at most its head and tail. */
const forwardedAtMost = (bytes: number, outputBytes: number): number => {
  const { headBytes, tailBytes } = outputWindow(outputBytes);
  return Math.min(bytes, headBytes + tailBytes);
};

export interface ServeInput {
  /**
   * Opens the channel to the pod's runner with these sinks: the attach held ahead for the pod
   * (pool-attachments.ts), routed to them, or a new attach.
   */
  open(onStdout: (data: Buffer) => void, onStderr: (data: Buffer) => void): Promise<AttachedPod>;
  attachedAhead: boolean;
  namespace: string;
  pod: { name: string; uid: string };
  pool: string | undefined;
  startedAt: string;
  job: Buffer;
  key: Buffer;
  /** The run's output limit (what the runner forwards of each stream). */
  outputBytes: number;
  limits: OutputLimits;
  /** What a run that asked for output files needs to read them. */
  files?: FilesRead | undefined;
  /** Called once the result is there (the run's key goes back on the queue). */
  onSettled: () => void;
  now: () => Date;
}

export function serveWarm(i: ServeInput): WarmServe {
  const filter = new TrailerFilter(i.key);
  const collector = new OutputCollector(i.limits, i.files);
  const timings: Partial<WarmTimings> = { attachedAhead: i.attachedAhead };
  let attached: AttachedPod | undefined;
  let aborted = false;
  let jobWrittenAt: number | undefined;
  let settled: WarmResult | undefined;
  let trailer: TrailerEnd | undefined;
  let settle!: (r: WarmResult) => void;
  const result = new Promise<WarmResult>((resolve) => {
    settle = (r) => {
      if (settled) return;
      settled = r;
      attached?.close();
      resolve(r);
      i.onSettled();
    };
  });
  let graceTimer: NodeJS.Timeout | undefined;
  const finish = (): void => {
    if (!trailer || settled) return;
    clearTimeout(graceTimer);
    settle({
      state: 'done',
      end: trailer,
      output: output(trailer),
      finishedAt: i.now().toISOString(),
      files: collector.returnedFiles(),
    });
  };
  const output = (end: TrailerEnd): RunOutput => {
    const out = collector.output();
    return end.kind === 'exit' ? withReportedBytes(out, end.report) : out;
  };
  let stderrBytes = 0;
  /** Whether the stderr the runner forwarded before its trailer has all arrived. */
  const stderrComplete = (end: TrailerEnd): boolean =>
    end.kind !== 'exit' || stderrBytes >= forwardedAtMost(end.report.stderrBytes, i.outputBytes);
  // stderr that came while stdout bytes were held back (they may be the trailer's start): it goes
  // into the output after them, as it came.
  let laterErr: Buffer[] = [];
  let heldBeforeErr = 0;
  const releaseErr = (): void => {
    for (const b of laterErr) collector.push(b);
    laterErr = [];
  };
  const onStdout = (data: Buffer): void => {
    if (trailer) return;
    const out = filter.push(data);
    if (laterErr.length) {
      const first = Math.min(heldBeforeErr, out.length);
      collector.push(out.subarray(0, first));
      heldBeforeErr -= first;
      if (heldBeforeErr === 0) releaseErr();
      if (out.length > first) collector.push(out.subarray(first));
    } else if (out.length) collector.push(out);
    const end = filter.complete();
    if (!end) return;
    releaseErr(); // what stdout held back is the trailer
    trailer = end;
    if (jobWrittenAt !== undefined) timings.jobToResultMs = Date.now() - jobWrittenAt;
    if (stderrComplete(end)) return finish();
    graceTimer = setTimeout(finish, STDERR_GRACE_MS);
  };
  const onStderr = (data: Buffer): void => {
    if (settled) return;
    stderrBytes += data.length;
    if (!trailer && (laterErr.length || filter.heldBytes > 0)) {
      if (!laterErr.length) heldBeforeErr = filter.heldBytes;
      laterErr.push(data);
    } else collector.push(data);
    if (trailer && stderrComplete(trailer)) finish();
  };

  void (async () => {
    const t0 = Date.now();
    try {
      attached = await i.open(onStdout, onStderr);
      if (!i.attachedAhead) timings.attachMs = Date.now() - t0;
      if (aborted) return attached.close();
      void attached.closed.then((why) => {
        if (trailer) return finish();
        settle({ state: 'lost', why, jobWritten: jobWrittenAt !== undefined });
      });
      await attached.write([i.job]);
      jobWrittenAt = Date.now();
    } catch (e) {
      settle({
        state: 'lost',
        why: `the attach to ${i.namespace}/${i.pod.name} failed: ${(e as Error).message}`,
        jobWritten: jobWrittenAt !== undefined,
      });
    }
  })();

  return {
    pod: i.pod,
    pool: i.pool,
    startedAt: i.startedAt,
    result,
    get settled() {
      return settled;
    },
    timings,
    get jobWrittenAt() {
      return jobWrittenAt;
    },
    abort() {
      aborted = true;
      clearTimeout(graceTimer);
      settle({ state: 'lost', why: 'the serve was stopped', jobWritten: jobWrittenAt !== undefined });
    },
  };
}
