/**
 * The execs of one session: started, streamed, and once finished turned into results with the run
 * result's field names, counted, audited and handed to the session's log.
 */
import { randomBytes } from 'node:crypto';
import { classify, failedFacts } from '../api/outcome.js';
import { buildResult, type CapturedStream } from '../api/result.js';
import type { ExecResult } from '../api/session.js';
import type {
  ExecExecution,
  ExecOutcome,
  FinishedExec,
  RecoveredExec,
  SessionSandbox,
} from '../backends/sessions.js';
import { buildExecAudit } from '../observability/audit.js';
import type { EffectiveExec, EffectiveSessionSpec } from '../policy/session.js';
import { toAppError, type AppError } from '../shared/errors.js';
import type { GatewayDeps } from './deps.js';
import { LiveOutput, type LiveChunk } from './live-output.js';
import type { ExecLogEntry } from './session-log.js';

export interface StartExecOptions {
  /** Aborting kills a foreground exec (a client that went away); a background one runs on. */
  signal?: AbortSignal | undefined;
  /** Each piece of output as the program writes it (the head of each stream). */
  onOutput?: ((chunk: LiveChunk) => void) | undefined;
  /** Keep stdin open for writeStdin() (a WebSocket). */
  streamStdin?: boolean | undefined;
  terminal?: { cols: number; rows: number } | undefined;
}

export interface ExecHandle {
  execId: string;
  /** Resolves for every outcome of the command, a failed sandbox included. */
  result: Promise<ExecResult>;
  /** Streamed stdin, resize and kill (WebSocket, MCP cancel). */
  execution: ExecExecution;
}

/** The session facts an exec's result and audit record need. */
export interface ExecContext {
  deps: GatewayDeps;
  session: {
    sessionId: string;
    spec: EffectiveSessionSpec;
    principalName: string;
  };
  finished: (entry: ExecLogEntry) => void;
}

interface RunningExec extends ExecHandle {
  argv: string[];
  background: boolean;
  startedAt: number;
  timeoutSeconds: number;
  live: LiveOutput;
}

export function newExecId(): string {
  return `exec-${randomBytes(6).toString('hex')}`;
}

const liveStream = (text: string): CapturedStream => ({
  text,
  bytes: Buffer.byteLength(text),
  truncated: false,
  binary: false,
});

export class ExecRunner {
  private readonly execs = new Map<string, RunningExec>();
  /** Execs started or recovered so far. */
  count = 0;

  get running(): string[] {
    return [...this.execs.keys()];
  }

  get(execId: string): RunningExec | undefined {
    return this.execs.get(execId);
  }

  start(
    sandbox: SessionSandbox,
    exec: EffectiveExec,
    options: StartExecOptions,
    context: ExecContext,
  ): ExecHandle {
    const execId = newExecId();
    const live = new LiveOutput();
    const hand = (chunk: LiveChunk): void => {
      try {
        options.onOutput?.(chunk);
      } catch {
        // A transport that fails to take output does not fail the exec.
      }
    };
    const execution = sandbox.exec(exec, {
      execId,
      onOutput: (chunk) => hand(live.add(chunk)),
      signal: exec.background ? undefined : options.signal,
      streamStdin: options.streamStdin,
      terminal: options.terminal,
    });
    return this.track(
      { execId, execution, argv: exec.argv, background: exec.background, startedAt: Date.now(), live },
      exec,
      context,
      () => live.end().forEach(hand),
    );
  }

  /** An exec a restarted gateway found in its adopted session: its result comes from the runner's buffer. */
  recover(exec: RecoveredExec, context: ExecContext): void {
    const effective: EffectiveExec = {
      argv: exec.argv,
      env: [],
      cwd: '',
      timeoutSeconds: context.session.spec.limits.timeoutSeconds,
      stdin: Buffer.alloc(0),
      background: exec.background,
      tty: false,
      outputBytes: context.session.spec.limits.outputBytes,
    };
    this.track(
      {
        execId: exec.execId,
        execution: exec,
        argv: exec.argv,
        background: exec.background,
        startedAt: exec.startedAt,
        live: new LiveOutput(),
      },
      effective,
      context,
      () => undefined,
    );
  }

  private track(
    base: Omit<RunningExec, 'result' | 'timeoutSeconds'>,
    exec: EffectiveExec,
    context: ExecContext,
    flush: () => void,
  ): ExecHandle {
    const result = base.execution.result
      .then(
        (outcome) => outcome,
        (e: unknown) => failedOutcome(toAppError(e, 'BACKEND_ERROR'), base.startedAt),
      )
      .then((outcome) => {
        flush();
        this.execs.delete(base.execId);
        return this.finished(base, exec, outcome, context);
      });
    const running: RunningExec = { ...base, timeoutSeconds: exec.timeoutSeconds, result };
    this.execs.set(base.execId, running);
    this.count++;
    return { execId: base.execId, result: running.result, execution: base.execution };
  }

  private finished(
    running: Omit<RunningExec, 'result' | 'timeoutSeconds'>,
    exec: EffectiveExec,
    outcome: ExecOutcome,
    context: ExecContext,
  ): ExecResult {
    const { deps, session } = context;
    const backend = deps.backend.name;
    const result = execResult(
      session,
      { execId: running.execId, timeoutSeconds: exec.timeoutSeconds },
      outcome,
      backend,
    );
    deps.metrics.execs.inc({ backend, phase: result.phase, reason: result.reason ?? '' });
    deps.metrics.execDuration.observe({ backend }, result.durationMs / 1000);
    deps.audit.record(
      buildExecAudit({
        session,
        exec,
        execId: running.execId,
        outcome: result,
        principal: session.principalName,
        backend,
        time: new Date(outcome.finishedAt),
      }),
    );
    context.finished({ execId: running.execId, argv: running.argv, background: running.background, result });
    return result;
  }

  /**
   * An exec another gateway ran and reported (the runner's history), as its log entry: it was
   * counted and audited where it ran, so nothing is recorded again here.
   */
  static logged(exec: FinishedExec, session: ExecContext['session'], backend: string): ExecLogEntry {
    const result = execResult(session, exec, exec.outcome, backend);
    return { execId: exec.execId, argv: exec.argv, background: exec.background, result };
  }

  /** A running exec's state now: its output so far. */
  current(execId: string, session: ExecContext['session'], backend: string): ExecResult | undefined {
    const running = this.execs.get(execId);
    if (!running) return undefined;
    return execResult(
      session,
      running,
      {
        outcome: { phase: 'Running', exitCode: null },
        stdout: liveStream(running.live.text.stdout),
        stderr: liveStream(running.live.text.stderr),
        startedAt: running.startedAt,
        finishedAt: Number.NaN,
      },
      backend,
    );
  }

  /** Resolves once every exec has its result (after the sandbox was closed, each is killed). */
  async settled(): Promise<void> {
    await Promise.all([...this.execs.values()].map((e) => e.result));
  }
}

/**
 * An exec that never ran. One the runner refused as sent (a cwd that is a symlink out of the
 * workspace, or that does not exist: only the sandbox can tell) is Rejected by the workspace's
 * rule, naming the field; anything else is the backend's failure.
 */
function failedOutcome(err: AppError, startedAt: number): ExecOutcome {
  const empty = liveStream('');
  const refusedAsSent =
    err.code === 'INVALID_REQUEST' || (err.code === 'NOT_FOUND' && err.violations.length > 0);
  return {
    outcome: refusedAsSent
      ? { phase: 'Rejected', reason: 'PolicyDenied', message: err.message, exitCode: null }
      : classify(failedFacts(err.message)),
    stdout: empty,
    stderr: empty,
    startedAt,
    finishedAt: Date.now(),
  };
}

function execResult(
  session: ExecContext['session'],
  running: Pick<RunningExec, 'execId' | 'timeoutSeconds'>,
  outcome: ExecOutcome,
  backend: string,
): ExecResult {
  const { spec } = session;
  const { runId: _none, ...result } = buildResult({
    runId: running.execId,
    subject: {
      template: spec.template,
      image: spec.image,
      runtime: spec.runtime,
      limits: { ...spec.limits, timeoutSeconds: running.timeoutSeconds },
    },
    outcome: outcome.outcome,
    stdout: outcome.stdout,
    stderr: outcome.stderr,
    startedAt: outcome.startedAt,
    finishedAt: Number.isNaN(outcome.finishedAt) ? undefined : outcome.finishedAt,
    backend,
  });
  return { ...result, execId: running.execId, sessionId: session.sessionId };
}
