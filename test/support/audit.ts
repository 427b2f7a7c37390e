/** Test support for the audit trail: records out of log lines, and an audit file's records. */
import { readFileSync } from 'node:fs';
import { AuditRecordSchema, type AuditRecord } from '../../src/api/audit.js';

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
