/**
 * A session sandbox over its runner's client (src/runner/session-client.ts): what every backend
 * whose sandboxes run sandpit-runner in session mode shares. The backend supplies the host: how
 * the sandbox is removed, detached, how it ended once it is gone, and what becomes of it then.
 */
import { classify, type RunFacts } from '../api/outcome.js';
import type { FileEntry, SessionReason } from '../api/session.js';
import type { EffectiveExec, EffectiveSessionSpec } from '../policy/session.js';
import { StreamCapture, type StreamName } from '../runner/capture.js';
import { outputWindow } from '../runner/protocol.js';
import type { ClientEnd, ExecHandle, HistoryEntry, SessionClient } from '../runner/session-client.js';
import {
  RETAINED_OUTPUT_BYTES,
  type RecoveredExecInfo,
  type SessionExit,
  type WireEntry,
} from '../runner/session-protocol.js';
import { onAbort } from '../shared/abort.js';
import { artifactTar } from './artifacts.js';
import { within } from '../shared/time.js';
import type {
  ExecExecution,
  ExecOptions,
  ExecOutcome,
  FileChange,
  FileRead,
  FileWrite,
  FinishedExec,
  RecoveredExec,
  SandboxEnd,
  SessionSandbox,
} from './sessions.js';

/** How long after an exec's own deadline the gateway stops waiting for the runner's report. */
export const OUTER_DEADLINE_GRACE_MS = 2000;

/** How long an exec whose runner went away waits to learn whether the sandbox died of OOM. */
const SANDBOX_END_WAIT_MS = 10_000;
/** The most entries one listing returns. */
export const MAX_LIST_ENTRIES = 50_000;

export interface SessionHost {
  /** Resolves once the sandbox's runner can no longer be reached (its container stopped). */
  readonly gone: Promise<void>;
  /**
   * How the sandbox ended by itself, once it is gone: the runner's own last record (`own`, when
   * it sent one) weighed against what the engine or the operator knows (OOM, the exit status, the
   * record of an end it made).
   */
  endOf(own: SandboxEnd | undefined): Promise<SandboxEnd>;
  /** Removes the sandbox; idempotent, never throws. */
  remove(): Promise<void>;
  /** What becomes of a sandbox that ended by itself, once its end is known; never throws. */
  retire(): Promise<void>;
  /** Leaves the sandbox running, attached to nothing (a restarted gateway adopts it). */
  detach(): void;
}

export interface RunnerSessionOptions {
  sessionId: string;
  client: SessionClient;
  host: SessionHost;
  spec: EffectiveSessionSpec;
  /** Claimed from a session pool, or started for it (the default; an adopted one was made long ago). */
  served?: 'warm' | 'cold';
}

export function toFileEntry(e: WireEntry): FileEntry {
  return {
    path: e.path,
    type: e.type,
    size: e.size,
    mode: e.mode.toString(8).padStart(4, '0'),
    mtime: new Date(e.mtimeMs).toISOString(),
  };
}

/** The runner's own end of the session, in the session model's reasons. */
function runnerEnd(end: ClientEnd): SandboxEnd | undefined {
  if (end.reason === 'ProtocolError') return { reason: 'ProtocolError', message: end.message };
  if (end.reason !== 'RunnerEnded') return undefined;
  const reasons: Record<string, SessionReason> = {
    TTLExpired: 'TTLExpired',
    IdleExpired: 'IdleExpired',
    Closed: 'Deleted',
    Stopped: 'ContainerFailed',
  };
  return { reason: reasons[end.runnerReason] ?? 'RunnerGone', message: end.message };
}

/**
 * Output of one exec: head live (capped), tail from the runner at the end, exact counts. A
 * recovered exec's head went to a gateway that is gone: what it has is the runner's kept output
 * (the last RETAINED_OUTPUT_BYTES of each stream), as its tail.
 */
class ExecCapture {
  private readonly streams: Record<StreamName, StreamCapture>;
  private readonly onOutput: ExecOptions['onOutput'];
  private readonly recovered: boolean;

  constructor(outputBytes: number, onOutput: ExecOptions['onOutput'], recovered = false) {
    const window = recovered ? { headBytes: 0, tailBytes: RETAINED_OUTPUT_BYTES } : outputWindow(outputBytes);
    this.streams = { stdout: new StreamCapture(window), stderr: new StreamCapture(window) };
    this.onOutput = onOutput;
    this.recovered = recovered;
  }

  output(stream: StreamName, data: Buffer): void {
    if (this.recovered) return this.onOutput({ stream, data: Buffer.from(data) });
    const shown = this.streams[stream].add(data);
    if (shown.length > 0) this.onOutput({ stream, data: Buffer.from(shown) });
  }

  tail(stream: StreamName, data: Buffer): void {
    this.streams[stream].addTail(data);
  }

  finish(report: SessionExit | undefined): Pick<ExecOutcome, 'stdout' | 'stderr'> {
    return {
      stdout: this.streams.stdout.finish(report?.stdoutBytes),
      stderr: this.streams.stderr.finish(report?.stderrBytes),
    };
  }
}

export class RunnerSession implements SessionSandbox {
  readonly sessionId: string;
  readonly served: 'warm' | 'cold';
  readonly ended: Promise<SandboxEnd>;
  private readonly client: SessionClient;
  private readonly host: SessionHost;
  private spec: EffectiveSessionSpec;
  private closing: Promise<void> | undefined;
  private detached = false;
  private doneResolve!: () => void;
  /** Resolves once this process is done with the sandbox: it ended, was closed, or was let go. */
  readonly done = new Promise<void>((r) => (this.doneResolve = r));

  constructor(options: RunnerSessionOptions) {
    this.sessionId = options.sessionId;
    this.served = options.served ?? 'cold';
    this.client = options.client;
    this.host = options.host;
    this.spec = options.spec;
    this.ended = new Promise<SandboxEnd>((resolve) => {
      const end = Promise.race([this.client.ended, this.host.gone.then(() => undefined)]);
      void end.then(async (clientEnd) => {
        if (this.closing || this.detached) return; // close() and detach() are not ends by itself
        const why = await this.host.endOf(clientEnd ? runnerEnd(clientEnd) : undefined);
        await this.host.retire();
        this.doneResolve();
        resolve(why);
      });
    });
  }

  exec(exec: EffectiveExec, options: ExecOptions): ExecExecution {
    const capture = new ExecCapture(exec.outputBytes, options.onOutput);
    const startedAt = Date.now();
    const handle = this.client.exec(
      {
        name: options.execId,
        argv: exec.argv,
        env: exec.env,
        cwd: exec.cwd,
        deadlineMs: exec.timeoutSeconds * 1000,
        window: outputWindow(exec.outputBytes),
        stdin: exec.stdin,
        streamStdin: options.streamStdin ?? false,
        tty: exec.tty ? (options.terminal ?? { cols: 80, rows: 24 }) : undefined,
        background: exec.background,
      },
      capture,
    );
    return execution(options.execId, handle, {
      capture,
      startedAt,
      deadlineMs: exec.timeoutSeconds * 1000,
      signal: options.signal,
      sandboxEnd: () => this.sandboxEnd(),
    });
  }

  /** The sandbox's own end once the runner is gone (waited for briefly); undefined while it lives. */
  private sandboxEnd(): Promise<SandboxEnd | undefined> {
    return this.client.isEnded ? within(this.ended, SANDBOX_END_WAIT_MS) : Promise.resolve(undefined);
  }

  /** The execs a resync reported, followed from now on (their output comes from the runner's buffer). */
  recover(execs: RecoveredExecInfo[], onOutput: ExecOptions['onOutput'] = () => {}): RecoveredExec[] {
    return execs.map((info) => {
      const capture = new ExecCapture(this.spec.limits.outputBytes, onOutput, true);
      const handle = this.client.attach(info.id, capture, info.tty);
      const startedAt = Date.now() - info.startedAgoMs;
      const deadlineMs = Math.max(0, this.spec.limits.timeoutSeconds * 1000 - info.startedAgoMs);
      return {
        ...execution(info.name, handle, {
          capture,
          startedAt,
          deadlineMs,
          signal: undefined,
          sandboxEnd: () => this.sandboxEnd(),
        }),
        argv: info.argv,
        background: info.background,
        startedAt,
      };
    });
  }

  async history(): Promise<FinishedExec[]> {
    const now = Date.now();
    return (await this.client.history()).map((entry) => finishedExec(entry, now));
  }

  async writeFile(write: FileWrite): Promise<FileEntry> {
    const entry = await this.client.write(
      { path: write.path, mode: write.mode, offset: write.offset, append: write.append },
      write.data,
    );
    return toFileEntry(entry);
  }

  async readFile(read: { path: string; maxBytes: number }): Promise<FileRead> {
    const { entry, data } = await this.client.read(read.path, read.maxBytes);
    return { entry: toFileEntry(entry), data };
  }

  async list(list: { path: string; recursive: boolean }): Promise<FileEntry[]> {
    return (await this.client.list(list.path, list.recursive, MAX_LIST_ENTRIES)).map(toFileEntry);
  }

  remove(remove: { path: string; recursive: boolean }): Promise<void> {
    return this.client.remove(remove.path, remove.recursive);
  }

  async mkdir(mkdir: { path: string }): Promise<FileEntry> {
    return toFileEntry(await this.client.mkdir(mkdir.path));
  }

  artifacts(artifacts: { path: string; maxBytes: number }): AsyncIterable<Buffer> {
    return artifactTar(this, artifacts);
  }

  watch(path: string, onChange: (change: FileChange) => void): Promise<() => void> {
    return this.client.watch(path, (c) => onChange({ path: c.path, kind: c.kind }));
  }

  async processes(): Promise<{ pid: number; command: string }[]> {
    return (await this.client.processes()).map((p) => ({ pid: p.pid, command: p.command }));
  }

  async setTtl(ttlSeconds: number): Promise<void> {
    await this.client.setLifetime({ ttlMs: ttlSeconds * 1000, idleMs: this.spec.idleTimeoutSeconds * 1000 });
    this.spec = { ...this.spec, ttlSeconds };
  }

  /** Asks the runner whether it still answers (within `ms`). */
  async answers(ms: number): Promise<boolean> {
    return (
      (await within(
        this.client.ping().then(
          () => true,
          () => false,
        ),
        ms,
      )) ?? false
    );
  }

  close(_reason: SessionReason): Promise<void> {
    this.closing ??= (async () => {
      this.client.end({ reason: 'TransportClosed', message: 'the session was closed' });
      await this.host.remove();
      this.doneResolve();
    })();
    return this.closing;
  }

  /** Lets go of the sandbox and leaves it running: a restarted gateway adopts it. */
  detach(): void {
    if (this.closing) return;
    this.detached = true;
    this.host.detach();
    this.doneResolve();
  }
}

/**
 * An exec of the runner's history as its result: the same as the gateway that ran it made when the
 * runner kept all of a stream (replayed through the exec's own window), else the last bytes kept.
 * Killed means killed by a gateway: the history does not say whether for a cancel or a deadline.
 */
export function finishedExec(entry: HistoryEntry, now: number): FinishedExec {
  const window = { headBytes: entry.window[0], tailBytes: entry.window[1] };
  const stream = (kept: Buffer, total: number) => {
    if (kept.length >= total) {
      const whole = new StreamCapture(window);
      whole.add(kept);
      return whole.finish(total);
    }
    const last = new StreamCapture({
      headBytes: 0,
      tailBytes: Math.min(kept.length, window.headBytes + window.tailBytes),
    });
    last.addTail(kept);
    return last.finish(total);
  };
  const { report } = entry;
  return {
    execId: entry.name,
    argv: entry.argv,
    background: entry.background,
    timeoutSeconds: Math.round(entry.deadlineMs / 1000),
    outcome: {
      outcome: classify(factsOf(report, report.killed ? 'cancel' : undefined)),
      stdout: stream(entry.stdout, report.stdoutBytes),
      stderr: stream(entry.stderr, report.stderrBytes),
      startedAt: now - entry.startedAgoMs,
      finishedAt: now - entry.finishedAgoMs,
    },
  };
}

interface ExecContext {
  capture: ExecCapture;
  startedAt: number;
  deadlineMs: number;
  signal: AbortSignal | undefined;
  /** How the session's sandbox ended, when its runner is gone; at once undefined while it lives. */
  sandboxEnd: () => Promise<SandboxEnd | undefined>;
}

/** An exec killed with its sandbox by the OOM killer: SIGKILL's status. */
const OOM_KILLED: RunFacts = { exitCode: 128 + 9, timedOut: false, oomKilled: true, cancelled: false };

/** What ended an exec from the gateway's side, if anything did. */
type KilledBy = 'cancel' | 'deadline' | undefined;

function factsOf(report: SessionExit | undefined, killedBy: KilledBy): RunFacts {
  if (!report) return { exitCode: null, timedOut: true, oomKilled: false, cancelled: false };
  const { exitCode, oomKilled } = report;
  const timedOut = report.timedOut || (report.killed && killedBy === 'deadline');
  return { exitCode, timedOut, oomKilled, cancelled: report.killed && killedBy === 'cancel' };
}

/**
 * One exec's handle and result: the runner's report classified like a run's. The gateway holds a
 * deadline of its own OUTER_DEADLINE_GRACE_MS after the runner's: it kills the exec then, and
 * gives up on a report one grace later (the exec then ends TimedOut with no exit code).
 */
function execution(execId: string, handle: ExecHandle, ctx: ExecContext): ExecExecution {
  let killedBy: KilledBy;
  const kill = (why: 'cancel' | 'deadline'): void => {
    killedBy ??= why;
    handle.kill();
  };
  const detach = onAbort(ctx.signal, () => kill('cancel'));
  let outerTimer: NodeJS.Timeout | undefined;
  const outer = new Promise<undefined>((resolve) => {
    outerTimer = setTimeout(() => {
      kill('deadline');
      outerTimer = setTimeout(() => resolve(undefined), OUTER_DEADLINE_GRACE_MS);
    }, ctx.deadlineMs + OUTER_DEADLINE_GRACE_MS);
  });
  const result = (async (): Promise<ExecOutcome> => {
    try {
      const { report, facts } = await Promise.race([handle.exit, outer]).then(
        (r) => ({ report: r, facts: factsOf(r, killedBy) }),
        async (e: unknown) => {
          // Under gVisor the sandbox is one process to the host's OOM killer: a memory bomb in an
          // exec takes the runner with it, and the sandbox's end says so.
          if ((await ctx.sandboxEnd())?.reason !== 'OOMKilled') throw e;
          return { report: undefined, facts: OOM_KILLED };
        },
      );
      const { stdout, stderr } = ctx.capture.finish(report);
      return { outcome: classify(facts), stdout, stderr, startedAt: ctx.startedAt, finishedAt: Date.now() };
    } finally {
      clearTimeout(outerTimer);
      detach();
    }
  })();
  return {
    execId,
    result,
    writeStdin: (data) => handle.writeStdin(data),
    endStdin: () => handle.endStdin(),
    resize: (cols, rows) => handle.resize(cols, rows),
    kill: () => kill('cancel'),
  };
}
