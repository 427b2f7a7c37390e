/** `sandpit audit`: the audit trail (the file and its rotated files), filtered, as a table or JSON Lines. */
import type { AuditRecord, EgressAuditRecord } from '../api/audit.js';
import { auditFilePath } from '../config/audit.js';
import {
  auditFiles,
  parseWhen,
  readAudit,
  type AuditFilter,
  type ReadStats,
} from '../observability/audit-query.js';
import { parse, printHelp } from './args.js';
import { loadContext } from './wiring.js';

export const AUDIT_USAGE = `
usage: sandpit audit [options]

Prints the audit trail: one record per run (and, with sessions, per exec and session event; with
egress, per connection through the proxy), oldest first, from the audit file and its rotated files (audit.jsonl.N … audit.jsonl.1, audit.jsonl).

  sandpit audit --since 1h                          the last hour, as a table
  sandpit audit --principal ci --outcome failed     one token's failed runs
  sandpit audit --run run-0123456789ab --json       one run's record, as stored

options:
      --since WHEN        records at or after WHEN: an age (30s, 15m, 1h, 2d, 1w) or ISO 8601
      --until WHEN        records at or before WHEN (same forms)
      --principal NAME    records of this principal (a token's name; local for the CLI and stdio)
      --run ID            the record of this run
      --session ID        records of this session (its events and execs)
      --exec ID           the record of this exec
      --outcome WORD      a phase or reason, any case: succeeded, failed, timedout, oomkilled, …;
                          allowed or denied for egress connections
      --event EVENT       run, exec, session (all session events), session.created|expired|deleted|failed,
                          or egress
      --json              the matching records as JSON Lines, exactly as stored
      --file PATH         the audit file to read (default: audit.file, else
                          \${XDG_STATE_HOME:-~/.local/state}/sandpit/audit.jsonl)
      --config PATH       config file (YAML or JSON); also SANDPIT_CONFIG
  -h, --help              this text

exit codes: 0 (also when nothing matches); 64 bad usage; 66 no audit file, or one that cannot be read.
`;

const OPTIONS = {
  since: { type: 'string' },
  until: { type: 'string' },
  principal: { type: 'string' },
  run: { type: 'string' },
  session: { type: 'string' },
  exec: { type: 'string' },
  outcome: { type: 'string' },
  event: { type: 'string' },
  json: { type: 'boolean' },
  file: { type: 'string' },
  config: { type: 'string' },
} as const;

export async function auditCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, OPTIONS, AUDIT_USAGE);
  if (values.help) {
    printHelp(AUDIT_USAGE);
    return 0;
  }
  const now = new Date();
  const filter: AuditFilter = {
    since: values.since !== undefined ? parseWhen(values.since, '--since', now) : undefined,
    until: values.until !== undefined ? parseWhen(values.until, '--until', now) : undefined,
    principal: values.principal,
    run: values.run,
    session: values.session,
    exec: values.exec,
    outcome: values.outcome,
    event: values.event,
  };
  const path = values.file ?? auditPath(values.config);
  const files = await auditFiles(path);
  const stats: ReadStats = { skipped: 0, skippedAt: [] };
  let count = 0;
  if (!values.json) process.stdout.write(`${row(HEADER)}\n`);
  for await (const { line, record } of readAudit(files, filter, stats)) {
    count++;
    process.stdout.write(`${values.json ? line : row(cells(record))}\n`);
  }
  if (!values.json && count === 0) process.stdout.write('(no records match)\n');
  if (stats.skipped) {
    process.stderr.write(
      `sandpit audit: skipped ${stats.skipped} line(s) that are not audit records (${stats.skippedAt.join(', ')}${stats.skipped > stats.skippedAt.length ? ', …' : ''})\n`,
    );
  }
  return 0;
}

/** The file the configuration names, or the default (what the gateway writes). */
function auditPath(configPath: string | undefined): string {
  const { config } = loadContext({ configPath, logLevel: 'warn' });
  return auditFilePath(config, process.env);
}

const COLUMNS = [
  ['TIME', 20],
  ['EVENT', 15],
  ['PRINCIPAL', 14],
  ['ID', 24],
  ['TEMPLATE', 10],
  ['OUTCOME', 24],
  ['EXIT', 5],
  ['DURATION', 9],
  ['IN', 8],
  ['OUT', 8],
  ['COMMAND', 0],
] as const;
const HEADER = COLUMNS.map(([name]) => name);

function fit(text: string, width: number): string {
  if (width === 0) return text;
  const chars = [...text];
  return chars.length > width ? `${chars.slice(0, width - 1).join('')}…` : text.padEnd(width);
}

function row(values: readonly string[]): string {
  return values
    .map((v, i) => fit(v, COLUMNS[i]![1]))
    .join(' ')
    .trimEnd();
}

function duration(ms: number | undefined): string {
  if (ms === undefined) return '-';
  return ms < 1000 ? `${Math.round(ms)}ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
}

function size(bytes: number | undefined): string {
  if (bytes === undefined) return '-';
  if (bytes < 1024) return `${bytes}B`;
  const [unit, n] = bytes < 1024 ** 2 ? ['KiB', bytes / 1024] : ['MiB', bytes / 1024 ** 2];
  return `${n < 10 ? n.toFixed(1) : Math.round(n)}${unit}`;
}

/** An egress record in the same columns: the sandbox, the host asked for, the decision and its rule. */
function egressCells(r: EgressAuditRecord): string[] {
  return [
    r.time.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
    r.event,
    r.principal,
    r.runId ?? r.sessionId ?? '-',
    `${r.host}:${r.port}`,
    r.error ? `${r.decision}/${r.error}` : r.decision,
    '-',
    duration(r.durationMs),
    size(r.bytesIn),
    size(r.bytesOut),
    `${r.method} ${r.rule}${r.address ? ` (dialed ${r.address})` : ''}`,
  ];
}

function cells(r: AuditRecord): string[] {
  if (r.event === 'egress') return egressCells(r);
  const id = r.event === 'run' ? r.runId : r.event === 'exec' ? `${r.sessionId}/${r.execId}` : r.sessionId;
  const command = 'command' in r ? (r.command.preview ?? r.command.digest.slice(0, 19)) : '';
  return [
    r.time.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
    r.event,
    r.principal,
    id,
    r.template ?? r.image,
    r.outcome.reason ? `${r.outcome.phase}/${r.outcome.reason}` : r.outcome.phase,
    'exitCode' in r && r.exitCode !== null && r.exitCode !== undefined ? String(r.exitCode) : '-',
    duration(r.durationMs),
    size(r.bytesIn),
    size(r.bytesOut),
    command,
  ];
}
