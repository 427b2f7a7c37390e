/**
 * The RunResult every transport returns, built one way for every backend: an outcome (classified
 * from facts, or read from a SandboxRun's status), the captured output, and what ran. Pure.
 */
import { formatCpu } from '../shared/quantity.js';
import type { Outcome } from './outcome.js';
import type { RunOutputs } from './outputs.js';
import type { EffectiveLimits, EffectiveLimitsView, RunResult } from './run.js';

/** One output stream as a caller sees it: capped text, the exact byte count, and flags. */
export interface CapturedStream {
  text: string;
  bytes: number;
  truncated: boolean;
  binary: boolean;
}

export const EMPTY_STREAM: CapturedStream = { text: '', bytes: 0, truncated: false, binary: false };

/**
 * What resolvers and clients print when a name lookup or a connection finds no network. Models
 * read such a traceback as a transient failure and retry, so the result says it is not.
 */
const NO_NETWORK =
  /Temporary failure in name resolution|Name or service not known|getaddrinfo ENOTFOUND|EAI_AGAIN|Could not resolve host|Network is unreachable/;
export const NO_NETWORK_HINT = 'this sandbox has no network (egress: none)';

/** What a program prints when sandpit's egress proxy refused it (the proxy's reason phrase and body). */
const PROXY_REFUSAL = /sandpit egress/;
export const PROXY_REFUSAL_HINT =
  "sandpit's egress proxy refused a destination: the error output says which rule; only what the allowlist names is reachable, never a private or loopback address";

/** The hint for a run whose error output shows it tried to reach the network (or was refused on its way). */
export function networkHint(errorOutput: string): string | undefined {
  if (PROXY_REFUSAL.test(errorOutput)) return PROXY_REFUSAL_HINT;
  return NO_NETWORK.test(errorOutput) ? NO_NETWORK_HINT : undefined;
}

/** What ran: the parts of the effective spec a result names. */
export interface RunSubject {
  template: string | undefined;
  image: string;
  runtime: string | undefined;
  limits: EffectiveLimits;
}

/** The limits a run had, as results show them. */
export function limitsView(limits: EffectiveLimits): EffectiveLimitsView {
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

/** A session's limits as its model and its audit records show them: a run's, plus its lifetime. */
export function sessionLimitsView(spec: {
  limits: EffectiveLimits;
  ttlSeconds: number;
  idleTimeoutSeconds: number;
  maxExecs: number;
}) {
  return {
    ...limitsView(spec.limits),
    ttlSeconds: spec.ttlSeconds,
    idleTimeoutSeconds: spec.idleTimeoutSeconds,
    maxExecs: spec.maxExecs,
  };
}

export interface ResultInput {
  runId: string;
  subject: RunSubject;
  outcome: Outcome;
  stdout?: CapturedStream | undefined;
  stderr?: CapturedStream | undefined;
  startedAt: number;
  /** Undefined while the run is still going: no finishedAt, and the duration so far is `now - startedAt`. */
  finishedAt: number | undefined;
  now?: number;
  backend: string;
  served?: 'cold' | 'warm' | undefined;
  /** Where the program's error messages are, when not in stderr (a pod log interleaves them into stdout). */
  errorText?: string | undefined;
  /** The files the run returned, when it asked for any. */
  outputs?: RunOutputs | undefined;
}

export function buildResult(input: ResultInput): RunResult {
  const { subject, outcome } = input;
  const stdout = input.stdout ?? EMPTY_STREAM;
  const stderr = input.stderr ?? EMPTY_STREAM;
  const end = input.finishedAt ?? input.now ?? Date.now();
  const hint = networkHint(input.errorText ?? stderr.text);
  return {
    runId: input.runId,
    phase: outcome.phase,
    ...(outcome.reason ? { reason: outcome.reason } : {}),
    ...(outcome.message ? { message: outcome.message } : {}),
    ...(hint ? { hint } : {}),
    exitCode: outcome.exitCode,
    timedOut: outcome.phase === 'TimedOut',
    stdout: stdout.text,
    stderr: stderr.text,
    truncated: stdout.truncated || stderr.truncated,
    stdoutBytes: stdout.bytes,
    stderrBytes: stderr.bytes,
    binaryOutput: stdout.binary || stderr.binary,
    durationMs: end - input.startedAt,
    ...(subject.template ? { template: subject.template } : {}),
    image: subject.image,
    ...(subject.runtime ? { runtime: subject.runtime } : {}),
    backend: input.backend,
    ...(input.served ? { served: input.served } : {}),
    limits: limitsView(subject.limits),
    ...timesAndFiles(input),
  };
}

/** When the run was made and finished, and its files: the fields a result has only sometimes. */
function timesAndFiles(input: ResultInput): Pick<RunResult, 'outputs' | 'createdAt' | 'finishedAt'> {
  return {
    ...(input.outputs ? { outputs: input.outputs } : {}),
    createdAt: new Date(input.startedAt).toISOString(),
    ...(input.finishedAt !== undefined ? { finishedAt: new Date(input.finishedAt).toISOString() } : {}),
  };
}
