/**
 * The audit trail: each record in the log and the file, the preview switch, the metrics, and the
 * gate: AUDIT_UNAVAILABLE (naming the file and why) while a real filesystem refuses the writes,
 * open again once they succeed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, test } from 'node:test';
import { pino } from 'pino';
import { createAuditTrail, type AuditGate } from '../../../src/observability/audit-trail.js';
import { createAuditMetrics } from '../../../src/observability/metrics.js';
import { AppError } from '../../../src/shared/errors.js';
import { pollUntil } from '../../../src/shared/time.js';
import { Registry } from 'prom-client';
import { fill, mountTmpfs, type Tmpfs } from '../../support/tmpfs.js';
import { readAuditFile, runRecord } from '../../support/audit.js';

const dir = mkdtempSync(join(tmpdir(), 'sandpit-audit-trail-'));
const mounts: Tmpfs[] = [];
after(() => {
  for (const m of mounts) m.unmount();
  rmSync(dir, { recursive: true, force: true });
});

const RECORD = runRecord({ principal: 'ci-bot' });

function logged() {
  const chunks: string[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _e, cb) {
        chunks.push(chunk.toString());
        cb();
      },
    }),
  );
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, lines };
}

function metrics() {
  const registry = new Registry();
  return { registry, audit: createAuditMetrics(registry) };
}

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const v = (metric?.values ?? []).find((x) =>
    Object.entries(labels).every(([k, want]) => (x.labels as Record<string, unknown>)[k] === want),
  );
  return v?.value ?? 0;
}

const fileOptions = (path: string) => ({
  path,
  maxBytes: 1024 ** 2,
  maxFiles: 5,
  flushIntervalMs: 20,
  retryIntervalMs: 50,
});

describe('records', () => {
  test('each record goes to the file and to the log (under `audit`, without the preview), counted once fsynced', async () => {
    const path = join(dir, 'a', 'audit.jsonl');
    const { logger, lines } = logged();
    const m = metrics();
    const trail = createAuditTrail({ logger, metrics: m.audit, file: fileOptions(path) });
    await trail.open();
    assert.equal(trail.file, path);
    trail.record(RECORD);
    trail.record({ ...RECORD, runId: 'run-2' });
    await trail.close();
    assert.deepEqual(readAuditFile(path), [RECORD, { ...RECORD, runId: 'run-2' }]);
    const audits = lines().filter((l) => l.msg === 'audit');
    const inLog = { ...RECORD, command: { digest: RECORD.command.digest } };
    assert.deepEqual(
      audits.map((l) => l.audit),
      [inLog, { ...inLog, runId: 'run-2' }],
    );
    assert.ok(!JSON.stringify(lines()).includes('print(1)'), 'the log never carries code');
    assert.equal(await value(m.registry, 'sandpit_audit_records_total'), 2);
  });

  test('audit.commandPreview off: the digest stays, the preview is in neither the file nor the log', async () => {
    const path = join(dir, 'b', 'audit.jsonl');
    const { logger, lines } = logged();
    const trail = createAuditTrail({ logger, commandPreview: false, file: fileOptions(path) });
    await trail.open();
    trail.record(RECORD);
    await trail.close();
    const [written] = readAuditFile(path);
    assert.deepEqual(written, { ...RECORD, command: { digest: RECORD.command.digest } });
    assert.ok(!readFileSync(path, 'utf8').includes('print(1)'));
    assert.ok(!JSON.stringify(lines()).includes('print(1)'));
  });

  test('without a file: the log only, counted there, and the gate never closes', async () => {
    const { logger, lines } = logged();
    const m = metrics();
    const trail = createAuditTrail({ logger, metrics: m.audit });
    await trail.open();
    assert.equal(trail.file, undefined);
    trail.assertAvailable();
    trail.record(RECORD);
    await trail.close();
    assert.equal(lines().filter((l) => l.msg === 'audit').length, 1);
    assert.equal(await value(m.registry, 'sandpit_audit_records_total'), 1);
  });

  test('a record after close is not lost silently: it is logged, with an error saying the file missed it', async () => {
    const path = join(dir, 'c', 'audit.jsonl');
    const { logger, lines } = logged();
    const trail = createAuditTrail({ logger, file: fileOptions(path) });
    await trail.open();
    await trail.close();
    trail.record(RECORD);
    assert.equal(readFileSync(path, 'utf8'), '');
    assert.ok(lines().some((l) => l.msg === 'audit'));
    assert.ok(lines().some((l) => l.level === 50 && String(l.msg).includes('after the audit file closed')));
  });
});

function available(gate: AuditGate): boolean {
  try {
    gate.assertAvailable();
    return true;
  } catch {
    return false;
  }
}

describe('the gate', () => {
  function assertRefused(fn: () => void, path: string, why: RegExp): AppError {
    let caught: unknown;
    try {
      fn();
    } catch (e) {
      caught = e;
    }
    assert.ok(caught instanceof AppError, `refused: ${String(caught)}`);
    assert.equal(caught.code, 'AUDIT_UNAVAILABLE');
    assert.equal(caught.httpStatus, 503);
    assert.equal(caught.exitCode, 74);
    assert.equal(caught.retryable, true);
    assert.ok(caught.message.includes(path), caught.message);
    assert.match(caught.hint ?? '', why);
    assert.ok(caught.hint?.includes(path), caught.hint);
    return caught;
  }

  test('ENOSPC on a full tmpfs: refused, counted, and open again once a write succeeds', async () => {
    const fs = mountTmpfs(64);
    mounts.push(fs);
    const path = join(fs.dir, 'audit.jsonl');
    const { logger, lines } = logged();
    const m = metrics();
    const trail = createAuditTrail({ logger, metrics: m.audit, file: fileOptions(path) });
    await trail.open();
    trail.assertAvailable();
    const filler = fill(fs.dir);
    trail.record(RECORD);
    await trail.flush();
    assertRefused(() => trail.assertAvailable(), path, /ENOSPC|filesystem is full/);
    assert.ok((await value(m.registry, 'sandpit_audit_write_failures_total', { code: 'ENOSPC' })) >= 1);
    assert.equal(await value(m.registry, 'sandpit_audit_records_total'), 0);
    // Retries fail once each interval; the log says so once.
    await pollUntil(async () => (await value(m.registry, 'sandpit_audit_write_failures_total')) >= 3, {
      intervalMs: 10,
      timeoutMs: 5000,
    });
    assert.equal(lines().filter((l) => l.msg === 'Audit file write failed; refusing new runs').length, 1);

    unlinkSync(filler);
    assert.ok(
      await pollUntil(() => available(trail), { intervalMs: 10, timeoutMs: 5000 }),
      'the gate opened again',
    );
    assert.deepEqual(readAuditFile(path), [RECORD], 'the record that waited is written once');
    assert.equal(await value(m.registry, 'sandpit_audit_records_total'), 1);
    assert.ok(lines().some((l) => l.msg === 'Audit file writable again; accepting runs'));
    await trail.close();
  });

  test('a filesystem already full at start-up closes the gate before the first run', async () => {
    const fs = mountTmpfs(64);
    mounts.push(fs);
    const filler = fill(fs.dir);
    const path = join(fs.dir, 'audit.jsonl');
    const { logger, lines } = logged();
    const trail = createAuditTrail({ logger, file: fileOptions(path) });
    await trail.open();
    assertRefused(() => trail.assertAvailable(), path, /filesystem is full; free space there/);
    unlinkSync(filler);
    assert.ok(await pollUntil(() => available(trail), { intervalMs: 10, timeoutMs: 5000 }));
    trail.record(RECORD);
    await trail.close();
    assert.deepEqual(readAuditFile(path), [RECORD]);
    assert.ok(!lines().some((l) => l.level === 50 && l.msg !== 'Audit file write failed; refusing new runs'));
  });

  test('a disk that fills while no record is due closes the gate before the next run, not after it', async () => {
    const fs = mountTmpfs(64);
    mounts.push(fs);
    const path = join(fs.dir, 'audit.jsonl');
    const m = metrics();
    const trail = createAuditTrail({ logger: logged().logger, metrics: m.audit, file: fileOptions(path) });
    await trail.open();
    trail.record(RECORD);
    await trail.flush();
    trail.assertAvailable();
    const filler = fill(fs.dir);
    // No record failed yet: the gate looks for itself.
    assertRefused(() => trail.assertAvailable(), path, /filesystem is full; free space there/);
    assert.equal(await value(m.registry, 'sandpit_audit_records_total'), 1);
    unlinkSync(filler);
    assert.ok(await pollUntil(() => available(trail), { intervalMs: 10, timeoutMs: 5000 }), 'open again');
    trail.record({ ...RECORD, runId: 'run-2' });
    await trail.close();
    assert.deepEqual(
      readAuditFile(path).map((r) => (r as { runId?: string }).runId),
      ['run-1', 'run-2'],
    );
  });

  test('written() resolves once the records so far are in the file: in their batch, or once a write succeeds', async () => {
    const fs = mountTmpfs(64);
    mounts.push(fs);
    const path = join(fs.dir, 'audit.jsonl');
    const trail = createAuditTrail({ logger: logged().logger, file: fileOptions(path) });
    await trail.open();
    await trail.written(); // nothing taken: at once
    trail.record(RECORD);
    await trail.written();
    assert.deepEqual(readAuditFile(path), [RECORD], 'in the file when written() resolves');
    const filler = fill(fs.dir);
    let done = false;
    // A record too big for the slack left in the file's last block.
    trail.record({ ...RECORD, runId: 'run-2', command: { ...RECORD.command, preview: 'x'.repeat(8000) } });
    const written = trail.written().then(() => (done = true));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(done, false, 'not while the file fails');
    unlinkSync(filler);
    // The file's retry timer does not hold the process open: wait with one that does.
    assert.ok(await pollUntil(() => done, { intervalMs: 10, timeoutMs: 5000 }), 'resolved after the retry');
    await written;
    assert.equal(readAuditFile(path).length, 2);
    await trail.close();
  });

  test('records that still cannot be written at close are logged at error level, whole', async () => {
    const { logger, lines } = logged();
    const trail = createAuditTrail({ logger, file: fileOptions('/dev/full') });
    await trail.open();
    trail.record(RECORD);
    await trail.close();
    const lost = lines().find(
      (l) => l.msg === 'Audit records could not be written to the audit file; here they are',
    );
    assert.ok(lost, 'the error line');
    assert.equal(lost.level, 50);
    assert.deepEqual(lost.records, [RECORD]);
  });

  test('EROFS at start-up: refused from the first run on, with the file and the fix in the hint', async () => {
    const fs = mountTmpfs(64, { readOnly: true });
    mounts.push(fs);
    const path = join(fs.dir, 'sandpit', 'audit.jsonl');
    const trail = createAuditTrail({ logger: logged().logger, file: fileOptions(path) });
    await trail.open();
    assertRefused(() => trail.assertAvailable(), path, /read-only; mount it read-write/);
    fs.readOnly(false);
    assert.ok(await pollUntil(() => available(trail), { intervalMs: 10, timeoutMs: 5000 }));
    await trail.close();
  });

  test('/dev/full: every write fails, so the gate stays closed', async () => {
    const trail = createAuditTrail({ logger: logged().logger, file: fileOptions('/dev/full') });
    await trail.open();
    trail.record(RECORD);
    await trail.flush();
    assertRefused(() => trail.assertAvailable(), '/dev/full', /filesystem is full/);
    await trail.close();
  });
});
