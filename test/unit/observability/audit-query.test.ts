/** Reading the trail back: times and ages, each filter, the files in order, skipped lines. */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { AuditRecord, RunAuditRecord } from '../../../src/api/audit.js';
import {
  auditFiles,
  matchesAudit,
  parseWhen,
  readAudit,
  type ReadStats,
} from '../../../src/observability/audit-query.js';
import { AppError } from '../../../src/shared/errors.js';
import { runRecord, sessionRecord } from '../../support/audit.js';

const dir = mkdtempSync(join(tmpdir(), 'sandpit-audit-query-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const NOW = new Date('2026-03-04T12:00:00Z');
const run = (runId: string, time: string, extra: Partial<RunAuditRecord> = {}): RunAuditRecord =>
  runRecord({ runId, time, command: { digest: `sha256:${'1'.repeat(64)}` }, ...extra });
const A = run('run-a', '2026-03-04T10:00:00.000Z');
const B = run('run-b', '2026-03-04T11:30:00.000Z', {
  principal: 'alice',
  exitCode: 137,
  outcome: { phase: 'Failed', reason: 'OOMKilled' },
});
const { runId: _run, ...executed } = run('', '2026-03-04T11:45:00.000Z', { principal: 'alice' });
const EXEC: AuditRecord = { ...executed, event: 'exec', sessionId: 'ses-1', execId: 'exe-1' };
const EXPIRED = sessionRecord({
  time: '2026-03-04T11:50:00.000Z',
  event: 'session.expired',
  principal: 'alice',
  outcome: { phase: 'Expired', reason: 'IdleExpired' },
});

describe('parseWhen', () => {
  test('ages count back from now', () => {
    assert.equal(parseWhen('90s', '--since', NOW).toISOString(), '2026-03-04T11:58:30.000Z');
    assert.equal(parseWhen('15m', '--since', NOW).toISOString(), '2026-03-04T11:45:00.000Z');
    assert.equal(parseWhen('1h', '--since', NOW).toISOString(), '2026-03-04T11:00:00.000Z');
    assert.equal(parseWhen('2d', '--since', NOW).toISOString(), '2026-03-02T12:00:00.000Z');
    assert.equal(parseWhen('1w', '--since', NOW).toISOString(), '2026-02-25T12:00:00.000Z');
  });

  test('ISO 8601 times and dates', () => {
    assert.equal(parseWhen('2026-03-04T05:06:07Z', '--until', NOW).toISOString(), '2026-03-04T05:06:07.000Z');
    assert.equal(
      parseWhen('2026-03-04T05:06:07+02:00', '--until', NOW).toISOString(),
      '2026-03-04T03:06:07.000Z',
    );
    assert.equal(parseWhen('2026-03-04', '--until', NOW).toISOString(), '2026-03-04T00:00:00.000Z');
  });

  test('anything else is INVALID_REQUEST naming the flag', () => {
    for (const bad of ['yesterday', '1y', '-1h', '', '12', '2026-13-45'])
      assert.throws(
        () => parseWhen(bad, '--since', NOW),
        (e: unknown) =>
          e instanceof AppError && e.code === 'INVALID_REQUEST' && e.message.startsWith('--since'),
        bad,
      );
  });
});

describe('matchesAudit', () => {
  const all = [A, B, EXEC, EXPIRED];
  const match = (f: Parameters<typeof matchesAudit>[1]) => all.filter((r) => matchesAudit(r, f));

  test('no filter: everything', () => assert.deepEqual(match({}), all));
  test('time: since and until, both inclusive', () => {
    assert.deepEqual(match({ since: new Date(B.time) }), [B, EXEC, EXPIRED]);
    assert.deepEqual(match({ until: new Date(B.time) }), [A, B]);
  });
  test('principal, run, session, exec', () => {
    assert.deepEqual(match({ principal: 'alice' }), [B, EXEC, EXPIRED]);
    assert.deepEqual(match({ run: 'run-a' }), [A]);
    assert.deepEqual(match({ session: 'ses-1' }), [EXEC, EXPIRED]);
    assert.deepEqual(match({ exec: 'exe-1' }), [EXEC]);
  });
  test('outcome: a phase or a reason, any case', () => {
    assert.deepEqual(match({ outcome: 'failed' }), [B]);
    assert.deepEqual(match({ outcome: 'oomkilled' }), [B]);
    assert.deepEqual(match({ outcome: 'Expired' }), [EXPIRED]);
  });
  test('event: exact, or a family', () => {
    assert.deepEqual(match({ event: 'run' }), [A, B]);
    assert.deepEqual(match({ event: 'session' }), [EXPIRED]);
    assert.deepEqual(match({ event: 'session.deleted' }), []);
  });
  test('filters combine', () => assert.deepEqual(match({ principal: 'alice', event: 'run' }), [B]));
});

describe('reading the files', () => {
  test('rotated files first (highest number first), then the current one; other names ignored', async () => {
    const d = join(dir, 'order');
    mkdirSync(d);
    const line = (r: AuditRecord) => `${JSON.stringify(r)}\n`;
    writeFileSync(join(d, 'audit.jsonl.2'), line(A));
    writeFileSync(join(d, 'audit.jsonl.10'), 'not even json\n');
    writeFileSync(join(d, 'audit.jsonl.1'), line(B) + '{"torn":');
    writeFileSync(join(d, 'audit.jsonl'), line(EXEC) + '\n' + line(EXPIRED));
    writeFileSync(join(d, 'audit.jsonl.lock'), '');
    writeFileSync(join(d, 'audit.jsonl.old'), line(A));
    const files = await auditFiles(join(d, 'audit.jsonl'));
    assert.deepEqual(
      files.map((f) => f.slice(d.length + 1)),
      ['audit.jsonl.10', 'audit.jsonl.2', 'audit.jsonl.1', 'audit.jsonl'],
    );
    const stats: ReadStats = { skipped: 0, skippedAt: [] };
    const got: AuditRecord[] = [];
    for await (const { record, line: text } of readAudit(files, {}, stats)) {
      got.push(record);
      assert.deepEqual(JSON.parse(text), record, 'the line as stored');
    }
    assert.deepEqual(got, [A, B, EXEC, EXPIRED]);
    assert.equal(stats.skipped, 2);
    assert.deepEqual(
      stats.skippedAt.map((s) => s.slice(d.length + 1)),
      ['audit.jsonl.10:1', 'audit.jsonl.1:2'],
    );
  });

  test('only rotated files left (the current one not yet written again): still read', async () => {
    const d = join(dir, 'rotated-only');
    mkdirSync(d);
    writeFileSync(join(d, 'audit.jsonl.1'), `${JSON.stringify(A)}\n`);
    assert.deepEqual(await auditFiles(join(d, 'audit.jsonl')), [join(d, 'audit.jsonl.1')]);
  });

  test('no file, or no directory: NOT_FOUND saying where it looked', async () => {
    const d = join(dir, 'empty');
    mkdirSync(d);
    for (const path of [join(d, 'audit.jsonl'), join(d, 'missing', 'audit.jsonl')])
      await assert.rejects(
        auditFiles(path),
        (e: unknown) =>
          e instanceof AppError && e.code === 'NOT_FOUND' && e.message.includes(path) && e.exitCode === 66,
      );
  });
});

describe('egress records', () => {
  const EGRESS: AuditRecord = {
    time: '2026-03-04T11:55:00.000Z',
    event: 'egress',
    principal: 'alice',
    backend: 'docker',
    runId: 'run-b',
    method: 'CONNECT',
    host: 'evil.example.com',
    port: 443,
    decision: 'denied',
    rule: "evil.example.com is not in this sandbox's allowlist",
    bytesOut: 0,
    bytesIn: 0,
    durationMs: 1,
  };

  test('are audit records: parsed back as they were written', async () => {
    const { AuditRecordSchema } = await import('../../../src/api/audit.js');
    assert.deepEqual(AuditRecordSchema.parse(JSON.parse(JSON.stringify(EGRESS))), EGRESS);
  });

  test('match their run, the egress event, and allowed or denied as the outcome', () => {
    assert.ok(matchesAudit(EGRESS, { run: 'run-b', event: 'egress', outcome: 'Denied' }));
    assert.ok(!matchesAudit(EGRESS, { outcome: 'allowed' }));
    assert.ok(!matchesAudit(EGRESS, { event: 'run' }));
  });
});
