/** Test support for the audit trail: records out of log lines, and an audit file's records. */
import { readFileSync } from 'node:fs';
import {
  AuditRecordSchema,
  type AuditRecord,
  type RunAuditRecord,
  type SessionAuditRecord,
} from '../../src/api/audit.js';
import type { EffectiveLimitsView } from '../../src/api/run.js';

/** Small limits for hand-made records. */
export const LIMITS: EffectiveLimitsView = {
  cpu: '1',
  memoryBytes: 1,
  pids: 1,
  workspaceBytes: 1,
  tmpBytes: 1,
  timeoutSeconds: 1,
  outputBytes: 1,
};

/** A hand-made run record: a succeeded python run by ci, with `extra` on top. */
export function runRecord(extra: Partial<RunAuditRecord> = {}): RunAuditRecord {
  return {
    time: '2026-03-04T05:06:07.089Z',
    event: 'run',
    runId: 'run-1',
    principal: 'ci',
    backend: 'docker',
    template: 'python',
    image: 'sandpit/python:3.11',
    command: { digest: `sha256:${'1'.repeat(64)}`, preview: 'print(1)' },
    limits: LIMITS,
    network: 'none',
    exitCode: 0,
    durationMs: 1,
    bytesIn: 8,
    bytesOut: 2,
    outcome: { phase: 'Succeeded', reason: 'Completed' },
    ...extra,
  };
}

/** A hand-made session record (the sessions work fills these in for real). */
export function sessionRecord(extra: Partial<SessionAuditRecord> = {}): SessionAuditRecord {
  return {
    time: '2026-03-04T05:06:07.089Z',
    event: 'session.created',
    sessionId: 'ses-1',
    principal: 'ci',
    backend: 'docker',
    image: 'sandpit/python:3.11',
    limits: { ...LIMITS, ttlSeconds: 3600, idleTimeoutSeconds: 600, maxExecs: 16 },
    network: 'none',
    outcome: { phase: 'Ready', reason: 'Created' },
    ...extra,
  };
}

/** The fields tests look at, whichever event the record is of. */
export type LoggedAudit = Partial<Record<'runId' | 'sessionId' | 'execId' | 'principal', string>> & {
  event: string;
  exitCode?: number | null;
  [key: string]: unknown;
};

/** The audit record a log line carries (`msg: "audit"`, the record under `audit`), if it is one. */
export function auditOf(line: { msg?: unknown; audit?: unknown }): LoggedAudit | undefined {
  if (line.msg !== 'audit' || typeof line.audit !== 'object' || line.audit === null) return undefined;
  return line.audit as LoggedAudit;
}

/** Every record of an audit file, each checked against the schema (a bad line fails the test). */
export function readAuditFile(path: string): AuditRecord[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line, i) => {
      const parsed = AuditRecordSchema.safeParse(JSON.parse(line));
      if (!parsed.success)
        throw new Error(`${path}:${i + 1} is not an audit record: ${parsed.error.message}`);
      return parsed.data;
    });
}
