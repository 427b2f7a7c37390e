/**
 * Reading the audit trail back: the file and its rotated predecessors, oldest first, each line
 * checked against the record schema and matched against a filter. Lines that are not records (a
 * line torn by a kill, a foreign line) are counted and skipped, never fatal.
 */
import { constants, createReadStream } from 'node:fs';
import { access, readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { AuditRecordSchema, type AuditRecord } from '../api/audit.js';
import { AppError } from '../shared/errors.js';

export interface AuditFilter {
  since?: Date | undefined;
  until?: Date | undefined;
  principal?: string | undefined;
  run?: string | undefined;
  session?: string | undefined;
  exec?: string | undefined;
  /** A phase or a reason, any case: `failed`, `OOMKilled`, `Expired`; `allowed` or `denied` for egress. */
  outcome?: string | undefined;
  /** An event, or its family: `run`, `exec`, `session` (every session.*), `session.expired`, `egress`. */
  event?: string | undefined;
}

const UNITS: Readonly<Record<string, number>> = { s: 1e3, m: 60e3, h: 3600e3, d: 86_400e3, w: 604_800e3 };

/** An instant from ISO 8601 (`2026-03-04`, `2026-03-04T05:06:07Z`) or an age (`90s`, `15m`, `1h`, `2d`, `1w`). */
export function parseWhen(text: string, flag: string, now: Date): Date {
  const age = /^(\d+)([smhdw])$/.exec(text.trim());
  if (age) return new Date(now.getTime() - Number(age[1]) * UNITS[age[2]!]!);
  const at = /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : NaN;
  if (Number.isNaN(at)) {
    throw new AppError(
      'INVALID_REQUEST',
      `${flag} expects a time like 2026-03-04T05:06:07Z or an age like 1h, got "${text}"`,
      {
        hint: 'ages: s, m, h, d, w (e.g. 30m, 2d); times: ISO 8601, UTC unless an offset is given',
      },
    );
  }
  return new Date(at);
}

type Ids = { runId?: string; sessionId?: string; execId?: string };

const same = (want: string | undefined, have: string | undefined): boolean =>
  want === undefined || want === have;

/** Each filter field's test; an absent field passes. */
const CHECKS: readonly ((r: AuditRecord & Ids, f: AuditFilter) => boolean)[] = [
  (r, f) => f.since === undefined || Date.parse(r.time) >= f.since.getTime(),
  (r, f) => f.until === undefined || Date.parse(r.time) <= f.until.getTime(),
  (r, f) => same(f.principal, r.principal),
  (r, f) => same(f.run, r.runId),
  (r, f) => same(f.session, r.sessionId),
  (r, f) => same(f.exec, r.execId),
  (r, f) =>
    f.outcome === undefined || outcomeWords(r).some((v) => v?.toLowerCase() === f.outcome?.toLowerCase()),
  (r, f) => f.event === undefined || r.event === f.event || r.event.startsWith(`${f.event}.`),
];

/** What `--outcome` matches: a phase or a reason; for an egress record, allowed or denied. */
function outcomeWords(r: AuditRecord): (string | undefined)[] {
  return r.event === 'egress' ? [r.decision] : [r.outcome.phase, r.outcome.reason];
}

export function matchesAudit(r: AuditRecord, f: AuditFilter): boolean {
  return CHECKS.every((check) => check(r, f));
}

/** Values a matching line must contain as JSON strings: a cheap test before parsing it. */
function needles(f: AuditFilter): string[] {
  return [f.principal, f.run, f.session, f.exec].filter((v) => v !== undefined).map((v) => JSON.stringify(v));
}

/** The audit file and its rotated files (`path.N` … `path.1`), oldest first; only those that exist. */
export async function auditFiles(path: string): Promise<string[]> {
  const name = basename(path);
  let entries: string[];
  try {
    entries = await readdir(dirname(path));
  } catch (e) {
    throw unreadable(path, e);
  }
  const rotated = entries
    .map((e) => ({ e, n: e.startsWith(`${name}.`) ? Number(e.slice(name.length + 1)) : NaN }))
    .filter(({ n }) => Number.isInteger(n) && n > 0)
    .sort((a, b) => b.n - a.n)
    .map(({ e }) => join(dirname(path), e));
  const files = [...rotated, ...(entries.includes(name) ? [path] : [])];
  if (!files.length) {
    throw new AppError('NOT_FOUND', `no audit file at ${path}`, {
      hint: 'nothing has been audited there yet, or the trail is elsewhere: pass --file PATH, or the --config that names audit.file',
    });
  }
  return files;
}

function unreadable(path: string, e: unknown): AppError {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') {
    return new AppError('NOT_FOUND', `no audit file at ${path}: its directory does not exist`, {
      hint: 'pass --file PATH, or the --config that names audit.file',
    });
  }
  return new AppError('NOT_FOUND', `cannot read the audit file ${path}: ${(e as Error).message}`, {
    hint:
      code === 'EACCES'
        ? 'run as the user that writes it (the file is private to its owner), or as root'
        : undefined,
    cause: e,
  });
}

export interface AuditLine {
  /** The line as stored (what --json prints). */
  line: string;
  record: AuditRecord;
}

export interface ReadStats {
  /** Lines that are not audit records, and where the first few are. */
  skipped: number;
  skippedAt: string[];
}

/** The matching records of `files`, in file order. `stats` fills in as it reads. */
export async function* readAudit(
  files: readonly string[],
  filter: AuditFilter,
  stats: ReadStats = { skipped: 0, skippedAt: [] },
): AsyncGenerator<AuditLine> {
  const must = needles(filter);
  for (const file of files) {
    let n = 0;
    try {
      await access(file, constants.R_OK);
      const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
      for await (const line of lines) {
        n++;
        if (!line.trim() || !must.every((m) => line.includes(m))) continue;
        const record = parseLine(line);
        if (!record) {
          stats.skipped++;
          if (stats.skippedAt.length < 5) stats.skippedAt.push(`${file}:${n}`);
        } else if (matchesAudit(record, filter)) yield { line, record };
      }
    } catch (e) {
      // A rotated file that a writer dropped since it was listed is simply gone.
      if ((e as NodeJS.ErrnoException).code === 'ENOENT' && n === 0) continue;
      throw typeof (e as NodeJS.ErrnoException).code === 'string' ? unreadable(file, e) : e;
    }
  }
}

function parseLine(line: string): AuditRecord | undefined {
  try {
    const parsed = AuditRecordSchema.safeParse(JSON.parse(line));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
