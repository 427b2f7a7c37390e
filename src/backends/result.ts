/**
 * How a run's facts become the shared phase and reason (DESIGN.md §4a). Pure, and used by every
 * backend so that the same program reports the same outcome everywhere.
 */
import type { EffectiveLimitsView, Phase, Reason, RunResult } from '../api/run.js';
import type { EffectiveSpec } from '../policy/evaluate.js';
import { formatCpu } from '../shared/quantity.js';
import type { CapturedStream } from './output.js';

export interface RunFacts {
  exitCode: number | null;
  timedOut: boolean;
  oomKilled: boolean;
  cancelled: boolean;
  /** The sandbox itself failed (runner error, engine error): the program's outcome is unknown. */
  failure?: string;
}

/** A run stopped by its caller: no exit code, nothing else to report. */
export const CANCELLED_FACTS: RunFacts = {
  exitCode: null,
  timedOut: false,
  oomKilled: false,
  cancelled: true,
};

export function classify(f: RunFacts): { phase: Phase; reason: Reason; message?: string } {
  if (f.cancelled) return { phase: 'Cancelled', reason: 'Cancelled', message: 'the run was cancelled' };
  if (f.timedOut)
    return { phase: 'TimedOut', reason: 'DeadlineExceeded', message: 'the deadline ended the run' };
  if (f.oomKilled)
    return { phase: 'Failed', reason: 'OOMKilled', message: 'the program ran out of memory and was killed' };
  if (f.failure !== undefined) return { phase: 'Failed', reason: 'BackendError', message: f.failure };
  if (f.exitCode === 0) return { phase: 'Succeeded', reason: 'Completed' };
  return {
    phase: 'Failed',
    reason: 'Error',
    message: `the program exited with code ${f.exitCode ?? 'unknown'}`,
  };
}

const EMPTY: CapturedStream = { text: '', bytes: 0, truncated: false, binary: false };

/** The limits a run had, as results show them. */
export function limitsView(limits: EffectiveSpec['limits']): EffectiveLimitsView {
  return {
    cpu: formatCpu(limits.cpuMilli),
    memoryBytes: limits.memoryBytes,
    pids: limits.pids,
    workspaceBytes: limits.workspaceBytes,
    tmpBytes: limits.tmpBytes,
    timeoutSeconds: limits.timeoutSeconds,
    outputBytes: limits.outputBytes,
  };
}

export function buildResult(input: {
  runId: string;
  spec: EffectiveSpec;
  facts: RunFacts;
  stdout?: CapturedStream;
  stderr?: CapturedStream;
  startedAt: number;
  finishedAt: number;
  backend: string;
  served?: 'cold' | 'warm';
}): RunResult {
  const { spec, facts } = input;
  const stdout = input.stdout ?? EMPTY;
  const stderr = input.stderr ?? EMPTY;
  const { phase, reason, message } = classify(facts);
  return {
    runId: input.runId,
    phase,
    reason,
    ...(message ? { message } : {}),
    exitCode: facts.exitCode,
    timedOut: phase === 'TimedOut',
    stdout: stdout.text,
    stderr: stderr.text,
    truncated: stdout.truncated || stderr.truncated,
    stdoutBytes: stdout.bytes,
    stderrBytes: stderr.bytes,
    binaryOutput: stdout.binary || stderr.binary,
    durationMs: input.finishedAt - input.startedAt,
    ...(spec.template ? { template: spec.template } : {}),
    image: spec.image,
    ...(spec.runtime ? { runtime: spec.runtime } : {}),
    backend: input.backend,
    ...(input.served ? { served: input.served } : {}),
    limits: limitsView(spec.limits),
    createdAt: new Date(input.startedAt).toISOString(),
    finishedAt: new Date(input.finishedAt).toISOString(),
  };
}
