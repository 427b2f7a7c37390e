/**
 * A finished SandboxRun's status as the shared RunResult. Pure. Phase, reason, message, exit
 * code and whether a pool's pod served it (`served`) are the controller's (it is the authority on
 * what happened); the output is what the gateway read from the pod log, or the status's bounded
 * tail when the log could not be read.
 */
import { buildResult, EMPTY_STREAM, type CapturedStream, type RunSubject } from '../../api/result.js';
import { isTerminal, type RunResult } from '../../api/run.js';
import {
  SandboxRunStatusSchema,
  type RunOutput,
  type SandboxRun,
  type SandboxRunStatus,
} from '../../api/v1alpha1/sandboxrun.js';

export const BACKEND_NAME = 'kubernetes';

/** Said on every result with output: the pod log of Kubernetes < 1.32 has one stream. */
export const INTERLEAVED_NOTE =
  'stdout holds stdout and stderr interleaved, as the pod log has them (stderr is empty on this backend)';

/** The status's output tail as a captured stream (a fallback: the tail only, the byte count exact up to the operator's read limit). */
export function outputFromStatus(output: RunOutput | undefined): CapturedStream {
  if (!output) return EMPTY_STREAM;
  const tail = output.tail ?? '';
  const shown = Buffer.byteLength(tail, 'utf8');
  const text = output.truncated
    ? `[… ${Math.max(0, output.bytes - shown)} bytes not shown …]\n${tail}`
    : tail;
  return { text, bytes: output.bytes, truncated: output.truncated, binary: false };
}

/**
 * The output bytes, when the status's tail is the whole output exactly: not truncated, and nothing
 * replaced by the operator's printable() (a replaced control character or invalid UTF-8 leaves
 * U+FFFD; a CRLF made LF changes the byte count). Then reading the log again would add nothing.
 */
export function exactStatusOutput(output: RunOutput | undefined): Buffer | undefined {
  if (!output || output.truncated) return undefined;
  const tail = output.tail ?? '';
  if (tail.includes('\uFFFD')) return undefined;
  const bytes = Buffer.from(tail, 'utf8');
  return bytes.length === output.bytes ? bytes : undefined;
}

export interface FinishedRun {
  runId: string;
  /** What ran. */
  spec: RunSubject;
  status: SandboxRunStatus;
  output: CapturedStream;
  /** Why the output is incomplete or from the status, when it is. */
  outputNote?: string | undefined;
  startedAt: number;
  finishedAt: number;
}

/** The operator is the authority on how the run ended: its status is the outcome, as it is. */
export function resultFromStatus(run: FinishedRun): RunResult {
  const { status } = run;
  const notes = [
    status.message,
    run.outputNote,
    run.output.bytes > 0 && !run.output.binary ? INTERLEAVED_NOTE : undefined,
  ].filter((n): n is string => Boolean(n));
  return buildResult({
    runId: run.runId,
    subject: run.spec,
    outcome: {
      phase: status.phase ?? 'Failed',
      reason: status.reason,
      message: notes.length ? notes.join('; ') : undefined,
      exitCode: status.exitCode ?? null,
    },
    stdout: run.output,
    // The pod log interleaves stderr into stdout.
    errorText: run.output.text,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    backend: BACKEND_NAME,
    served: status.served ?? 'cold',
    outputs: status.outputs,
  });
}

/**
 * A run as its SandboxRun records it, for a gateway process that does not follow it: the status as
 * it is now (Pending until the operator has written one), with the status's output tail once the
 * run has ended. Pure.
 */
export function resultFromRecord(run: SandboxRun, subject: RunSubject, now = Date.now()): RunResult {
  const parsed = SandboxRunStatusSchema.safeParse(run.status ?? {});
  const status = parsed.success ? parsed.data : {};
  const time = (t: string | undefined): number | undefined => {
    const ms = t === undefined ? NaN : Date.parse(t);
    return Number.isFinite(ms) ? ms : undefined;
  };
  const startedAt = time(run.metadata.creationTimestamp) ?? now;
  const phase = status.phase ?? 'Pending';
  if (isTerminal(phase)) {
    return resultFromStatus({
      runId: run.metadata.name,
      spec: subject,
      status: { ...status, phase },
      output: outputFromStatus(status.output),
      startedAt,
      finishedAt: time(status.completionTime) ?? now,
    });
  }
  return buildResult({
    runId: run.metadata.name,
    subject,
    outcome: { phase, reason: status.reason, message: status.message, exitCode: null },
    startedAt,
    finishedAt: undefined,
    now,
    backend: BACKEND_NAME,
    // Known once the operator has served it: a warm run's status says so with its first Running.
    served: status.served ?? 'cold',
  });
}
