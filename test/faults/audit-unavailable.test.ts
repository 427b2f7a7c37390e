/**
 * A gateway whose audit file cannot be written refuses new work with AUDIT_UNAVAILABLE rather than
 * run anything unaudited: its disk filled while it serves (a small tmpfs this test mounts), and a
 * read-only audit filesystem from the start. What runs when the disk fills finishes, and its
 * record is written once there is room; nothing is left behind.
 */
import assert from 'node:assert/strict';
import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AuditRecord, RunAuditRecord } from '../../src/api/audit.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callTool, textOf } from '../e2e/helpers.js';
import { fill, mountTmpfs, type Tmpfs } from '../support/tmpfs.js';
import {
  containersOf,
  gateway,
  marker,
  onlyLiveContainersOf,
  processesWith,
  sleeper,
  type Answer,
  type Gateway,
} from './harness.js';

const mounts: Tmpfs[] = [];
after(() => {
  for (const m of mounts) m.unmount();
});

/** The REST refusal: 503 with the typed error, naming the file and why. */
function assertRefused(answer: Answer, file: string, why: RegExp): void {
  assert.equal(answer.status, 503, answer.text);
  const error = answer.json.error as { code?: string; message?: string; hint?: string } | undefined;
  assert.equal(error?.code, 'AUDIT_UNAVAILABLE', answer.text);
  assert.ok(error?.message?.includes(file), answer.text);
  assert.match(`${error?.message} ${error?.hint}`, why);
}

function assertToolRefused(result: CallToolResult, why: RegExp): void {
  assert.equal(result.isError, true, textOf(result));
  assert.match(textOf(result), /^AUDIT_UNAVAILABLE: the audit file .* cannot be written/);
  assert.match(textOf(result), why);
  assert.equal(
    (result._meta?.['sandpit.dev/error'] as { code?: string } | undefined)?.code,
    'AUDIT_UNAVAILABLE',
  );
}

/** A run the gateway accepts: the gate opens at the audit file's next retry (each second) once it can write. */
async function acceptedRun(g: Gateway, code: string): Promise<Answer> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const res = await g.rest('POST', '/runs', { template: 'bash', code });
    if (res.status !== 503) return res;
    assert.ok(Date.now() < deadline, `the gate opened again: ${res.text}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const runIdsOf = (records: AuditRecord[]) =>
  records.filter((r): r is RunAuditRecord => r.event === 'run').map((r) => r.runId);

describe('faults: the audit file’s disk full while the gateway serves', { timeout: 120_000 }, () => {
  let disk: Tmpfs;
  let g: Gateway;
  let filler: string;
  let sessionId: string;
  let underway: Answer;
  const mark = marker('audit');

  before(async () => {
    disk = mountTmpfs(256);
    mounts.push(disk);
    g = await gateway({
      backend: 'docker',
      auditFile: join(disk.dir, 'audit.jsonl'),
      config: { pool: { enabled: false } },
    });
    const created = await g.rest('POST', '/sessions', { template: 'bash' });
    assert.equal(created.status, 201, created.text);
    sessionId = created.json.id as string;
  });
  after(() => g?.served.stop());

  test('a run under way when the disk fills finishes (its record written then, or once there is room)', async () => {
    const running = g.rest('POST', '/runs', { template: 'bash', code: `echo up; ${sleeper(mark, 2)}` });
    const deadline = Date.now() + 30_000;
    while (processesWith(mark).length === 0) {
      assert.ok(Date.now() < deadline, 'the run started');
      await new Promise((r) => setTimeout(r, 100));
    }
    filler = fill(disk.dir);
    underway = await running;
    assert.equal(underway.json.phase, 'Succeeded', underway.text);
    assert.equal(underway.json.stdout, 'up\n');
  });

  test('new runs (REST and MCP), sessions and execs are refused with AUDIT_UNAVAILABLE; nothing starts', async () => {
    const file = g.auditFile;
    const before = await containersOf(g.served.pid);
    assertRefused(await g.rest('POST', '/runs', { template: 'bash', code: 'echo never' }), file, /ENOSPC/);
    const mcp = await g.mcp();
    const client = mcp.client;
    try {
      assertToolRefused(
        await callTool(client, 'run_code', { language: 'python', code: 'print(1)' }),
        /ENOSPC/,
      );
      assertToolRefused(await callTool(client, 'sandbox_create', { template: 'bash' }), /ENOSPC/);
    } finally {
      await mcp.close();
    }
    assertRefused(await g.rest('POST', '/sessions', { template: 'bash' }), file, /free space there/);
    assertRefused(
      await g.rest('POST', `/sessions/${sessionId}/exec`, { command: ['echo', 'never'] }),
      file,
      /ENOSPC/,
    );
    const known = new Set(before.map((c) => c.name));
    const started = (await containersOf(g.served.pid)).filter((c) => !known.has(c.name));
    assert.deepEqual(started, [], 'no sandbox was started');
  });

  test('with room again the gate opens within its retry, work resumes, and every run is audited once', async () => {
    unlinkSync(filler);
    const next = await acceptedRun(g, 'echo resumed');
    assert.equal(next.json.phase, 'Succeeded', next.text);
    const exec = await g.rest('POST', `/sessions/${sessionId}/exec`, { command: ['echo', 'again'] });
    assert.equal(exec.json.stdout, 'again\n', exec.text);
    assert.equal((await g.rest('DELETE', `/sessions/${sessionId}`)).status, 200);
    const records = await g.audit((rs) => rs.some((r) => r.event === 'session.deleted'));
    assert.deepEqual(runIdsOf(records), [underway.json.runId, next.json.runId]);
    assert.deepEqual(
      records.map((r) => r.event),
      ['session.created', 'run', 'run', 'exec', 'session.deleted'],
      'every run and exec once; nothing refused is in the trail',
    );
  });

  test('nothing is left: no container, no process', async () => {
    const pid = g.served.pid;
    await g.served.stop();
    await onlyLiveContainersOf(pid);
    assert.deepEqual(processesWith(mark), []);
  });
});

describe('faults: the audit file not writable', { timeout: 120_000 }, () => {
  test('a read-only audit filesystem: every request refused from the first; writable again, runs resume', async () => {
    const disk = mountTmpfs(256, { readOnly: true });
    mounts.push(disk);
    const g = await gateway({
      backend: 'docker',
      auditFile: join(disk.dir, 'sandpit', 'audit.jsonl'),
      config: { pool: { enabled: false } },
    });
    try {
      assertRefused(
        await g.rest('POST', '/runs', { template: 'bash', code: 'echo never' }),
        g.auditFile,
        /EROFS.*read-only; mount it read-write/,
      );
      assertRefused(await g.rest('POST', '/sessions', { template: 'bash' }), g.auditFile, /EROFS/);
      assert.deepEqual(await containersOf(g.served.pid), []);
      disk.readOnly(false);
      const res = await acceptedRun(g, 'echo written');
      assert.equal(res.json.phase, 'Succeeded', res.text);
      assert.deepEqual(runIdsOf(await g.audit((rs) => runIdsOf(rs).length > 0)), [res.json.runId]);
    } finally {
      const pid = g.served.pid;
      await g.served.stop();
      await onlyLiveContainersOf(pid);
    }
  });
});
