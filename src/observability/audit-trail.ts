/**
 * The audit trail: every record goes to the log at once (without the command preview: logs never
 * carry code) and, when a file is configured, to the audit file (audit-file.ts), preview included. While the file cannot be written the gate refuses new work with
 * AUDIT_UNAVAILABLE, so nothing runs unaudited; it opens again as soon as a write succeeds.
 */
import type { AuditRecord } from '../api/audit.js';
import { AppError } from '../shared/errors.js';
import { AuditFile, type AuditFileOptions } from './audit-file.js';
import type { Logger } from './logger.js';
import type { AuditMetrics } from './metrics.js';

/** What every use case that starts something calls first: runs now, sessions and execs next. */
export interface AuditGate {
  /** Throws AUDIT_UNAVAILABLE (naming the file and why) while records cannot be written. */
  assertAvailable(): void;
}

export interface AuditTrail extends AuditGate {
  /**
   * Logs the record (without its preview) and appends it to the file, where it is fsynced within
   * the flush interval.
   */
  record(record: AuditRecord): void;
  /** The audit file, when there is one. */
  readonly file: string | undefined;
  /** Opens the file (a failure closes the gate; it never throws). */
  open(): Promise<void>;
  /** Resolves once every record taken so far is written, or writing failed. */
  flush(): Promise<void>;
  /**
   * Resolves once every record taken so far is in the file (fsynced in its batch's time; while the
   * file fails, only once a write succeeds); at once without a file.
   */
  written(): Promise<void>;
  /** Writes what is left and closes the file; records that still fail are reported (they are in the log). */
  close(): Promise<void>;
}

export interface AuditTrailOptions {
  logger: Logger;
  metrics?: AuditMetrics | undefined;
  /** Keep `command.preview` in the file's records (default true); off, only the digest remains. */
  commandPreview?: boolean;
  /** The audit file; without one, records go to the log only and the gate never closes. */
  file?: AuditFileOptions | undefined;
}

/** errno codes the failure metric names; anything else is `other` (a closed label set). */
const KNOWN_CODES = ['ENOSPC', 'EDQUOT', 'EACCES', 'EPERM', 'EROFS', 'ENOENT', 'ENOTDIR', 'EISDIR', 'EIO'];

const WHY: Readonly<Record<string, string>> = {
  ENOSPC: 'its filesystem is full; free space there',
  EDQUOT: 'the disk quota is used up; free space or raise the quota',
  EACCES: 'permission denied; let this user write the file and its directory',
  EPERM: 'operation not permitted; let this user write the file and its directory',
  EROFS: 'its filesystem is read-only; mount it read-write',
  ENOENT: 'its directory cannot be created',
  ENOTDIR: 'a part of its path is not a directory',
  EISDIR: 'the path is a directory',
};

export function auditUnavailable(path: string, error: NodeJS.ErrnoException): AppError {
  const code = error.code ?? 'EIO';
  return new AppError(
    'AUDIT_UNAVAILABLE',
    `the audit file ${path} cannot be written (${code}), so nothing new is run until it can`,
    {
      hint: `${path}: ${WHY[code] ?? error.message}; or set audit.file (SANDPIT_AUDIT_FILE) to a writable path. Runs resume as soon as a write succeeds`,
      cause: error,
    },
  );
}

export function createAuditTrail(options: AuditTrailOptions): AuditTrail {
  const { logger, metrics } = options;
  const preview = options.commandPreview ?? true;
  let lastCode: string | undefined;
  let closed = false;
  const file = options.file
    ? new AuditFile(options.file, {
        written: (lines) => metrics?.records.inc(lines),
        failed: (error) => {
          const code = error.code ?? 'EIO';
          metrics?.writeFailures.inc({ code: KNOWN_CODES.includes(code) ? code : 'other' });
          // Retries fail once a second: log the first failure and each change of cause only.
          if (code !== lastCode)
            logger.error(
              { file: file?.path, code, err: error.message },
              'Audit file write failed; refusing new runs',
            );
          lastCode = code;
        },
        recovered: () => {
          lastCode = undefined;
          logger.info({ file: file?.path }, 'Audit file writable again; accepting runs');
        },
      })
    : undefined;

  const withoutPreview = (record: AuditRecord): AuditRecord => {
    if (!('command' in record) || record.command.preview === undefined) return record;
    const { preview: _dropped, ...command } = record.command;
    return { ...record, command };
  };

  return {
    file: file?.path,
    assertAvailable() {
      const failure = file?.check();
      if (file && failure) throw auditUnavailable(file.path, failure);
    },
    record(record) {
      const kept = preview ? record : withoutPreview(record);
      // Logs never carry code (DESIGN.md §9): the preview is the private file's alone.
      logger.info({ audit: withoutPreview(kept) }, 'audit');
      if (!file) metrics?.records.inc();
      else if (closed)
        logger.error({ file: file.path }, 'Audit record after the audit file closed; it is in the log only');
      else file.append(JSON.stringify(kept));
    },
    open: async () => file?.open(),
    flush: async () => file?.flush(),
    written: async () => file?.written(),
    async close() {
      if (!file || closed) return;
      closed = true;
      await file.close();
      const pending = file.pending;
      // At error level with the records themselves: a terminal command logs only warnings and errors.
      if (pending.length)
        logger.error(
          {
            file: file.path,
            code: file.failure?.code,
            records: pending.map((l) => JSON.parse(l) as unknown),
          },
          'Audit records could not be written to the audit file; here they are',
        );
    },
  };
}
