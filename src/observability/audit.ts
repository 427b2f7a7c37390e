/**
 * Audit records, built (pure): what ran, by digest and a short preview, never env values or file
 * contents. One builder per kind of record (run, exec, session event), over the same command and
 * byte helpers, so every record of the trail is made one way.
 */
import { createHash } from 'node:crypto';
import { describeNetwork, type EffectiveNetwork } from '../api/egress.js';
import {
  PREVIEW_CHARS,
  type AuditCommand,
  type ExecAuditRecord,
  type RunAuditRecord,
  type SessionAuditRecord,
} from '../api/audit.js';
import { limitsView, sessionLimitsView } from '../api/result.js';
import type { RunResult } from '../api/run.js';
import type { SessionReason, SessionState } from '../api/session.js';
import type { EffectiveSpec } from '../policy/evaluate.js';
import type { EffectiveExec, EffectiveSessionSpec, SessionFacts } from '../policy/session.js';

/** The few facts of how a run ended that its audit record carries (a RunResult has them all). */
export type AuditOutcome = Pick<
  RunResult,
  'runId' | 'phase' | 'reason' | 'exitCode' | 'durationMs' | 'stdoutBytes' | 'stderrBytes'
>;

/** What a program was given: the parts a command digest covers and bytes in counts. */
export interface AuditedInput {
  argv: readonly string[];
  code?: Buffer | undefined;
  files?: readonly { path: string; content: Buffer }[];
  stdin?: Buffer | undefined;
}

/** sha256 over argv, code, files and stdin: identifies what ran without revealing it. */
export function commandDigest(input: AuditedInput): string {
  const h = createHash('sha256');
  for (const a of input.argv) h.update(a).update('\0');
  h.update('code\0').update(input.code ?? Buffer.alloc(0));
  for (const f of input.files ?? []) h.update(`\0file\0${f.path}\0`).update(f.content);
  h.update('\0stdin\0').update(input.stdin ?? Buffer.alloc(0));
  return `sha256:${h.digest('hex')}`;
}

/** Bytes of code, files and stdin. */
export function bytesIn(input: AuditedInput): number {
  const files = (input.files ?? []).reduce((n, f) => n + f.content.length, 0);
  return (input.code?.length ?? 0) + files + (input.stdin?.length ?? 0);
}

const PLAIN_ARG = /^[\w@%+=:,./-]+$/;

/** argv as a shell would read it: plain words bare, others single-quoted. */
export function argvText(argv: readonly string[]): string {
  return argv.map((a) => (PLAIN_ARG.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`)).join(' ');
}

/**
 * The first PREVIEW_CHARS characters of `text` on one line: line breaks shown as ↵, other control
 * characters and runs of blanks as one space, `…` when cut.
 */
export function previewOf(text: string): string {
  const line = text
    .trim()
    .replace(/\s*(?:\r\n|\r|\n)\s*/g, ' ↵ ')
    // eslint-disable-next-line no-control-regex
    .replace(/[\s\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ')
    .trim();
  const chars = [...line];
  return chars.length > PREVIEW_CHARS ? `${chars.slice(0, PREVIEW_CHARS).join('').trimEnd()}…` : line;
}

/** The command of a record: its digest, and a preview of the code when there is some, else of argv. */
export function auditCommand(input: AuditedInput): AuditCommand {
  const code = input.code?.length ? input.code.toString('utf8') : undefined;
  return { digest: commandDigest(input), preview: previewOf(code ?? argvText(input.argv)) };
}

function inputOf(spec: EffectiveSpec): AuditedInput {
  return { argv: spec.argv, code: spec.code?.content, files: spec.files, stdin: spec.stdin };
}

export interface RunAuditInput {
  spec: EffectiveSpec;
  outcome: AuditOutcome;
  principal: string;
  backend: string;
  /** When the run ended. */
  time: Date;
}

export function buildRunAudit({ spec, outcome, principal, backend, time }: RunAuditInput): RunAuditRecord {
  const input = inputOf(spec);
  return {
    time: time.toISOString(),
    event: 'run',
    runId: outcome.runId,
    ...sandboxFacts(spec, principal, backend),
    command: auditCommand(input),
    limits: limitsView(spec.limits),
    exitCode: outcome.exitCode,
    durationMs: outcome.durationMs,
    bytesIn: bytesIn(input),
    bytesOut: outcome.stdoutBytes + outcome.stderrBytes,
    outcome: { phase: outcome.phase, ...(outcome.reason !== undefined ? { reason: outcome.reason } : {}) },
  };
}

/** What every record says of the sandbox: who, where, which template and image. */
function sandboxFacts(
  subject: {
    template: string | undefined;
    image: string;
    runtime: string | undefined;
    network: EffectiveNetwork;
  },
  principal: string,
  backend: string,
) {
  return {
    principal,
    backend,
    ...(subject.template !== undefined ? { template: subject.template } : {}),
    image: subject.image,
    ...(subject.runtime !== undefined ? { runtime: subject.runtime } : {}),
    network: describeNetwork(subject.network),
  };
}

export interface ExecAuditInput {
  session: { sessionId: string; spec: EffectiveSessionSpec };
  exec: EffectiveExec;
  execId: string;
  outcome: Pick<RunResult, 'phase' | 'reason' | 'exitCode' | 'durationMs' | 'stdoutBytes' | 'stderrBytes'>;
  principal: string;
  backend: string;
  time: Date;
}

export function buildExecAudit(input: ExecAuditInput): ExecAuditRecord {
  const { session, exec, outcome } = input;
  const audited: AuditedInput = { argv: exec.argv, stdin: exec.stdin };
  return {
    time: input.time.toISOString(),
    event: 'exec',
    sessionId: session.sessionId,
    execId: input.execId,
    ...sandboxFacts(session.spec, input.principal, input.backend),
    command: auditCommand(audited),
    limits: limitsView({ ...session.spec.limits, timeoutSeconds: exec.timeoutSeconds }),
    exitCode: outcome.exitCode,
    durationMs: outcome.durationMs,
    bytesIn: bytesIn(audited),
    bytesOut: outcome.stdoutBytes + outcome.stderrBytes,
    outcome: { phase: outcome.phase, ...(outcome.reason !== undefined ? { reason: outcome.reason } : {}) },
  };
}

export interface SessionAuditInput {
  sessionId: string;
  spec: SessionFacts;
  state: SessionState;
  reason: SessionReason;
  principal: string;
  backend: string;
  time: Date;
  /** Set once the session has ended. */
  usage?: { durationMs: number; bytesIn: number; bytesOut: number } | undefined;
}

const SESSION_EVENT: Record<SessionState, SessionAuditRecord['event']> = {
  Creating: 'session.created',
  Ready: 'session.created',
  Expired: 'session.expired',
  Deleted: 'session.deleted',
  Failed: 'session.failed',
};

export function buildSessionAudit(input: SessionAuditInput): SessionAuditRecord {
  return {
    time: input.time.toISOString(),
    event: SESSION_EVENT[input.state],
    sessionId: input.sessionId,
    ...sandboxFacts(input.spec, input.principal, input.backend),
    limits: sessionLimitsView(input.spec),
    ...(input.usage ?? {}),
    outcome: { phase: input.state, reason: input.reason },
  };
}
