/**
 * `sandpit audit` from the built CLI over a file that real `sandpit run`s wrote: --help, the
 * filters, JSON Lines and the table, a torn line, and the errors for a missing or unreadable file.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import type { RunAuditRecord } from '../../src/api/audit.js';
import type { RunResult } from '../../src/api/run.js';
import { requireDocker } from '../support/docker.js';
import { CLI, cleanEnv, ensureBuilt, tempDir } from './helpers.js';

const dir = tempDir('audit');
const state = join(dir, 'state');
const file = join(state, 'sandpit', 'audit.jsonl');

function sandpit(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    env: cleanEnv({ XDG_STATE_HOME: state, ...env }),
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const records = (stdout: string): RunAuditRecord[] =>
  stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as RunAuditRecord);

let ok: RunResult;
let failed: RunResult;

before(async () => {
  await requireDocker();
  ensureBuilt();
  const a = sandpit(['run', '--json', '-c', 'print("audited")']);
  assert.equal(a.code, 0, a.stderr);
  ok = JSON.parse(a.stdout) as RunResult;
  const b = sandpit(['run', '--json', '-t', 'bash', '-c', 'exit 3']);
  assert.equal(b.code, 3, b.stderr);
  failed = JSON.parse(b.stdout) as RunResult;
});

describe('sandpit audit', () => {
  test('--help says what it reads and every filter', () => {
    const r = sandpit(['audit', '--help']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^usage: sandpit audit/);
    for (const flag of [
      '--since',
      '--until',
      '--principal',
      '--run',
      '--session',
      '--exec',
      '--outcome',
      '--json',
      '--file',
    ])
      assert.ok(r.stdout.includes(flag), `--help names ${flag}`);
    assert.match(sandpit(['--help']).stdout, /audit {5}the audit trail/);
  });

  test('the runs are in the default file ($XDG_STATE_HOME/sandpit/audit.jsonl), found by run id', () => {
    const r = sandpit(['audit', '--json', '--run', ok.runId]);
    assert.equal(r.code, 0, r.stderr);
    const [record, ...rest] = records(r.stdout);
    assert.deepEqual(rest, []);
    assert.equal(record!.runId, ok.runId);
    assert.equal(record!.principal, 'local');
    assert.equal(record!.command.preview, 'print("audited")');
    assert.deepEqual(record!.outcome, { phase: 'Succeeded', reason: 'Completed' });
    const stored = sandpit(['audit', '--json', '--file', file]).stdout.split('\n');
    assert.ok(stored.includes(r.stdout.trim()), '--json prints the line exactly as stored');
  });

  test('filters: outcome, principal, time, event', () => {
    const ids = (args: string[]) => records(sandpit(['audit', '--json', ...args]).stdout).map((r) => r.runId);
    assert.deepEqual(ids(['--outcome', 'failed']), [failed.runId]);
    assert.deepEqual(ids(['--outcome', 'error']), [failed.runId], 'a reason matches too');
    assert.deepEqual(ids(['--principal', 'local', '--since', '1h']), [ok.runId, failed.runId]);
    assert.deepEqual(ids(['--until', '2000-01-01']), []);
    assert.deepEqual(ids(['--since', ok.finishedAt!, '--outcome', 'succeeded']), [ok.runId]);
    assert.deepEqual(ids(['--event', 'session']), []);
    assert.deepEqual(ids(['--principal', 'someone-else']), []);
  });

  test('the table: one row per record, a header, and a note when nothing matches', () => {
    const r = sandpit(['audit', '--since', '1h']);
    assert.equal(r.code, 0, r.stderr);
    const [header, ...rows] = r.stdout.trim().split('\n');
    assert.match(
      header!,
      /^TIME +EVENT +PRINCIPAL +ID +TEMPLATE +OUTCOME +EXIT +DURATION +IN +OUT +COMMAND$/,
    );
    assert.equal(rows.length, 2);
    assert.match(
      rows[0]!,
      new RegExp(`run +local +${ok.runId} +python +Succeeded/Completed +0 .*print\\("audited"\\)`),
    );
    assert.match(rows[1]!, new RegExp(`${failed.runId} +bash +Failed/Error +3 `));
    assert.match(sandpit(['audit', '--run', 'run-none']).stdout, /\(no records match\)/);
  });

  test('a torn or foreign line is skipped with a note, the rest still read; rotated files come first', () => {
    const copy = join(dir, 'copy', 'audit.jsonl');
    mkdirSync(join(dir, 'copy'));
    const lines = sandpit(['audit', '--json']).stdout.trim().split('\n');
    writeFileSync(`${copy}.1`, `${lines[0]}\n`);
    writeFileSync(copy, `${lines[1]}\n`);
    appendFileSync(copy, '{"time":"2026-01-01T00:00:00Z","event":"ru');
    const r = sandpit(['audit', '--json', '--file', copy]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      records(r.stdout).map((x) => x.runId),
      [ok.runId, failed.runId],
    );
    assert.match(r.stderr, new RegExp(`skipped 1 line\\(s\\) that are not audit records \\(${copy}:2\\)`));
  });

  test('a missing file, an unreadable one and a bad time are clear errors', () => {
    const missing = sandpit(['audit', '--file', join(dir, 'nowhere', 'audit.jsonl')]);
    assert.equal(missing.code, 66);
    assert.match(missing.stderr, /no audit file at .*nowhere\/audit\.jsonl/);
    const empty = join(dir, 'empty');
    mkdirSync(empty);
    const none = sandpit(['audit'], { SANDPIT_AUDIT_FILE: join(empty, 'audit.jsonl') });
    assert.equal(none.code, 66);
    assert.match(none.stderr, /no audit file at .*empty\/audit\.jsonl/);
    assert.match(none.stderr, /hint: nothing has been audited there yet/);
    const isDir = join(dir, 'a-directory');
    mkdirSync(isDir);
    const unreadable = sandpit(['audit', '--file', isDir]);
    assert.equal(unreadable.code, 66);
    assert.match(unreadable.stderr, /cannot read the audit file .*a-directory: EISDIR/);
    const bad = sandpit(['audit', '--since', 'yesterday']);
    assert.equal(bad.code, 64);
    assert.match(bad.stderr, /--since expects a time like .* or an age like 1h, got "yesterday"/);
  });
});
