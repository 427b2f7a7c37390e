/**
 * The reliability report (issue 21): every hostile case in every configuration it ran in, every
 * fault, every load check with its figures, and the totals the README quotes. Made from the JSON
 * lines test/run.sh writes under SANDPIT_RESULTS_DIR (test/support/results-reporter.mjs).
 *
 *   node --import tsx test/reliability/report.ts --results DIR [--out FILE] [--matrix full|ci]
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

export interface TestRecord {
  file: string;
  suites: string[];
  name: string;
  status: 'pass' | 'fail' | 'skip' | 'todo';
  durationMs: number;
  error?: string;
  figures?: { name: string; value: number; unit: string; bound?: string }[];
}

export interface Totals {
  /** Distinct hostile cases (a category's named test), whatever the configurations. */
  cases: number;
  /** Hostile cases times the configurations each ran in. */
  tries: number;
  /** Tries that stayed contained (passed). */
  contained: number;
  faults: number;
  faultsSurvived: number;
  loadChecks: number;
  loadPassed: number;
}

interface Meta {
  date: string;
  machine: string;
  matrix: string;
}

type Kind = 'hostile' | 'faults' | 'load';

interface Placed {
  kind: Kind;
  /** The suite's title without its kind and configuration, e.g. `resource bombs`. */
  category: string;
  /** The configuration in the suite's title's last parentheses, e.g. `docker, runc, warm, run`. */
  config: string;
  record: TestRecord;
}

/** Where a record belongs, from its outermost suite (`hostile: <category> (<config>)`), or undefined. */
export function place(record: TestRecord): Placed | undefined {
  const title = record.suites[0] ?? '';
  const m = /^(hostile|faults|load): (.*?)(?: \(([^()]*)\))?$/.exec(title);
  if (!m) return undefined;
  return { kind: m[1] as Kind, category: m[2] ?? '', config: m[3] ?? '', record };
}

/** The case's name within its category: the inner suites' names, then its own. */
const caseName = (p: Placed): string => [...p.record.suites.slice(1), p.record.name].join(' › ');

const passed = (r: TestRecord): boolean => r.status === 'pass';

export function totals(records: readonly TestRecord[]): Totals {
  const placed = records.map(place).filter((p): p is Placed => p !== undefined);
  const of = (kind: Kind): Placed[] => placed.filter((p) => p.kind === kind);
  const hostile = of('hostile');
  return {
    cases: new Set(hostile.map((p) => `${p.category}\0${caseName(p)}`)).size,
    tries: hostile.length,
    contained: hostile.filter((p) => passed(p.record)).length,
    faults: of('faults').length,
    faultsSurvived: of('faults').filter((p) => passed(p.record)).length,
    loadChecks: of('load').length,
    loadPassed: of('load').filter((p) => passed(p.record)).length,
  };
}

const cell = (s: string): string => s.replaceAll('|', '\\|').replaceAll('\n', ' ');

function groupBy<T>(items: readonly T[], key: (t: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

const mark = (r: TestRecord | undefined): string =>
  r === undefined ? '–' : r.status === 'pass' ? 'contained' : r.status === 'fail' ? '**failed**' : r.status;

function hostileSection(placed: Placed[]): string[] {
  const lines: string[] = ['## Hostile programs', ''];
  for (const [category, cases] of groupBy(placed, (p) => p.category)) {
    const configs = [...new Set(cases.map((p) => p.config))];
    lines.push(`### ${category}`, '', `| case | ${configs.map(cell).join(' | ')} |`);
    lines.push(`|---|${configs.map(() => '---').join('|')}|`);
    for (const [name, tries] of groupBy(cases, caseName)) {
      const by = new Map(tries.map((p) => [p.config, p.record]));
      lines.push(`| ${cell(name)} | ${configs.map((c) => mark(by.get(c))).join(' | ')} |`);
    }
    lines.push('');
  }
  const failed = placed.filter((p) => p.record.status === 'fail');
  if (failed.length > 0) {
    lines.push(
      '### What failed, and why',
      '',
      '| category | configuration | case | error |',
      '|---|---|---|---|',
    );
    for (const p of failed)
      lines.push(
        `| ${cell(p.category)} | ${cell(p.config)} | ${cell(caseName(p))} | ${cell(p.record.error ?? '')} |`,
      );
    lines.push('');
  }
  return lines;
}

function listSection(title: string, placed: Placed[], ok: string): string[] {
  const lines = [`## ${title}`, '', '| suite | case | outcome | figures |', '|---|---|---|---|'];
  for (const p of placed) {
    const figures = (p.record.figures ?? [])
      .map((f) => `${f.name} ${f.value} ${f.unit}${f.bound ? ` (bound ${f.bound})` : ''}`)
      .join('; ');
    const outcome = passed(p.record)
      ? ok
      : `**${p.record.status}**${p.record.error ? `: ${p.record.error}` : ''}`;
    const suite = [p.category, p.config].filter(Boolean).join(', ');
    lines.push(`| ${cell(suite)} | ${cell(caseName(p))} | ${cell(outcome)} | ${cell(figures)} |`);
  }
  return [...lines, ''];
}

export function renderReport(records: readonly TestRecord[], meta: Meta): string {
  const t = totals(records);
  const placed = records.map(place).filter((p): p is Placed => p !== undefined);
  const of = (kind: Kind): Placed[] => placed.filter((p) => p.kind === kind);
  return [
    '# Reliability report',
    '',
    `Made by test/reliability/report.ts (\`npm run test:reliability\`, or \`npm run report:reliability\` from a run's results) on ${meta.date}, on ${meta.machine}.`,
    `Matrix: ${meta.matrix}. Each row is a named test in test/hostile, test/faults or test/load.`,
    '',
    '## Totals',
    '',
    '| what | count |',
    '|---|---|',
    `| Hostile cases | ${t.cases} |`,
    `| Tries (cases × configurations) | ${t.tries} |`,
    `| Contained | ${t.contained} |`,
    `| Faults survived | ${t.faultsSurvived} of ${t.faults} |`,
    `| Load checks passed | ${t.loadPassed} of ${t.loadChecks} |`,
    '',
    ...hostileSection(of('hostile')),
    ...listSection('Faults', of('faults'), 'survived'),
    ...listSection('Load', of('load'), 'passed'),
  ].join('\n');
}

/** The totals a report states (its Totals table), for the README's check. */
export function parseTotals(report: string): Totals {
  const row = (label: string): RegExpExecArray => {
    const m = new RegExp(`^\\| ${label} \\| (\\d+)(?: of (\\d+))? \\|$`, 'm').exec(report);
    if (!m) throw new Error(`the report has no "${label}" row`);
    return m;
  };
  const of = (label: string): [number, number] => {
    const m = row(label);
    return [Number(m[1]), Number(m[2])];
  };
  const [faultsSurvived, faults] = of('Faults survived');
  const [loadPassed, loadChecks] = of('Load checks passed');
  return {
    cases: Number(row('Hostile cases')[1]),
    tries: Number(row('Tries \\(cases × configurations\\)')[1]),
    contained: Number(row('Contained')[1]),
    faults,
    faultsSurvived,
    loadChecks,
    loadPassed,
  };
}

/** Reads every `*.jsonl` file in `dir`. */
export function readResults(dir: string): TestRecord[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .flatMap((f) =>
      readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as TestRecord),
    );
}

export function machine(): string {
  const cores = cpus().length;
  return `${cores} cores, ${Math.round(totalmem() / 1024 ** 3)} GiB, Linux ${release()}, Node ${process.version}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      results: { type: 'string' },
      out: { type: 'string' },
      matrix: { type: 'string', default: process.env.SANDPIT_RELIABILITY === 'full' ? 'full' : 'ci' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help || !values.results) {
    process.stdout.write(
      'usage: node --import tsx test/reliability/report.ts --results DIR [--out FILE] [--matrix full|ci]\n' +
        'Writes the reliability report (markdown) from the JSON lines test/run.sh wrote under\n' +
        'SANDPIT_RESULTS_DIR; to stdout without --out.\n',
    );
    process.exit(values.help ? 0 : 64);
  }
  const records = readResults(values.results);
  const matrix =
    values.matrix === 'full'
      ? 'the full matrix (SANDPIT_RELIABILITY=full): every backend, runtime, cold and warm, runs and sessions'
      : 'the CI subset: runc warm runs and sessions per backend, and a gVisor subset';
  const text = renderReport(records, {
    date: new Date().toISOString().slice(0, 10),
    machine: machine(),
    matrix,
  });
  if (values.out) writeFileSync(values.out, text);
  else process.stdout.write(text);
}
