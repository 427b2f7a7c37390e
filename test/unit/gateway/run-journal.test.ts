/**
 * The run journal: a run under way is remembered, without its code, with the record it gets if
 * its process dies first; it is forgotten once its own record is in the audit file. The next
 * process audits the runs of processes that are gone (Failed, BackendError, no exit code), each
 * once, and leaves the runs of live ones alone.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { RunAuditRecordSchema, type RunAuditRecord } from '../../../src/api/audit.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { fileRunJournal, lostRunRecord, type RunJournal } from '../../../src/gateway/run-journal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { createAuditTrail } from '../../../src/observability/audit-trail.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { pollUntil } from '../../../src/shared/time.js';
import { readAuditFile, runRecord } from '../../support/audit.js';
import { liveRunsBackend } from '../../support/live-runs-backend.js';

const newDir = (what: string) => mkdtempSync(join(tmpdir(), `sandpit-run-journal-${what}-`));
const DEAD = 'host:1:1';
const LIVE = 'host:2:2';
const journalOf = (dir: string, owner: string): RunJournal =>
  fileRunJournal(dir, silentLogger(), { owner, alive: (o) => o !== DEAD });

async function serviceWith(journal: RunJournal, auditFile: string) {
  const metrics = createMetrics();
  const audit = createAuditTrail({
    logger: silentLogger(),
    metrics: metrics.audit,
    file: { path: auditFile, maxBytes: 1024 ** 2, maxFiles: 1, flushIntervalMs: 20 },
  });
  await audit.open();
  const { backend } = liveRunsBackend(false);
  const service = new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics,
    audit,
    slots: { maxConcurrent: 4, maxQueued: 0 },
    runJournal: journal,
  });
  return { service, metrics };
}

const entries = (dir: string) => readdirSync(dir).filter((n) => n.endsWith('.json'));

describe('run journal', () => {
  test('a run under way is remembered without its code, and forgotten once its record is written', async () => {
    const dir = newDir('live');
    const auditFile = join(newDir('audit'), 'audit.jsonl');
    const { service } = await serviceWith(journalOf(dir, LIVE), auditFile);
    const controller = new AbortController();
    const handle = await service.runs.start(
      { template: 'python', code: 'print("secret-code-1")' },
      LOCAL_PRINCIPAL,
      {
        signal: controller.signal,
      },
    );
    assert.deepEqual(entries(dir), [`${handle.runId}.json`]);
    const text = readFileSync(join(dir, `${handle.runId}.json`), 'utf8');
    assert.ok(!text.includes('secret-code-1'), 'no code on disk');
    const entry = JSON.parse(text) as { owner: string; record: unknown };
    assert.equal(entry.owner, LIVE);
    const record = RunAuditRecordSchema.parse(entry.record);
    assert.equal(record.runId, handle.runId);
    assert.equal(record.principal, LOCAL_PRINCIPAL.name);
    assert.deepEqual(record.outcome, { phase: 'Failed', reason: 'BackendError' });
    assert.equal(record.exitCode, null);
    assert.match(record.command.digest, /^sha256:/);

    controller.abort();
    assert.equal((await handle.result).phase, 'Cancelled');
    assert.ok(
      await pollUntil(() => entries(dir).length === 0, { intervalMs: 10, timeoutMs: 5000 }),
      'forgotten',
    );
    assert.deepEqual(
      readAuditFile(auditFile).map((r) => [(r as RunAuditRecord).runId, r.event]),
      [[handle.runId, 'run']],
      'its own record is in the file',
    );
    await service.shutdown();
  });

  test('the next process audits the runs of a process that is gone, each once; a live one’s stay', async () => {
    const dir = newDir('orphans');
    const dead = journalOf(dir, DEAD);
    const startedAt = Date.now() - 5000;
    dead.remember({
      runId: 'run-dead1',
      startedAt,
      record: runRecord({ runId: 'run-dead1', exitCode: null }),
    });
    journalOf(dir, LIVE).remember({
      runId: 'run-live1',
      startedAt,
      record: runRecord({ runId: 'run-live1' }),
    });
    const auditFile = join(newDir('audit'), 'audit.jsonl');
    const { service, metrics } = await serviceWith(journalOf(dir, 'host:3:3'), auditFile);
    assert.equal(service.runs.auditLost(), 1);
    assert.equal(service.runs.auditLost(), 0, 'each once');
    await service.shutdown();
    const [lost, ...rest] = readAuditFile(auditFile) as RunAuditRecord[];
    assert.deepEqual(rest, []);
    assert.equal(lost?.runId, 'run-dead1');
    assert.ok(Date.parse(lost.time) >= startedAt + 5000, 'stamped when it was found');
    assert.ok(lost.durationMs >= 5000, 'at most as long as until it was found');
    assert.deepEqual(entries(dir), ['run-live1.json'], 'the live process’s run stays');
    assert.match(
      await metrics.registry.metrics(),
      /sandpit_runs_total\{backend="docker",phase="Failed",reason="BackendError",component="gateway"\} 1/,
    );
  });

  test('what cannot be read is skipped; a lost run’s record says when it was found', () => {
    const dir = newDir('bad');
    writeFileSync(join(dir, 'run-bad.json'), '{not json');
    assert.deepEqual(journalOf(dir, LIVE).takeOrphans(), []);
    const record = lostRunRecord({ runId: 'run-1', startedAt: 1000, record: runRecord() }, 4500);
    assert.equal(record.time, new Date(4500).toISOString());
    assert.equal(record.durationMs, 3500);
  });
});
