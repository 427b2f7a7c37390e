/**
 * The project's own dockerd restarted (by its PID; live-restore off) while a Docker gateway has a
 * run under way (over MCP) and a session with an exec under way (over REST), and an oci gateway a
 * run of its own. One restart serves every case below; each then checks its part: how it ended,
 * that it is audited, that nothing is left, and that the gateway carries on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type {
  AuditRecord,
  ExecAuditRecord,
  RunAuditRecord,
  SessionAuditRecord,
} from '../../src/api/audit.js';
import type { RunResult } from '../../src/api/run.js';
import { containerId } from '../../src/backends/oci/layout.js';
import { ociLeftovers } from '../support/oci.js';
import {
  gateway,
  marker,
  idlePoolContainer,
  onlyLiveContainersOf,
  processesWith,
  restartEngine,
  sleeper,
  runTool,
  type Answer,
  type Gateway,
} from './harness.js';

let docker: Gateway;
let oci: Gateway;
const runMark = marker('engine-run');
const execMark = marker('engine-exec');
const ociMark = marker('engine-oci');
let sessionId: string;
let run: RunResult;
let exec: Answer;
let ociRun: Answer;
let restart: Awaited<ReturnType<typeof restartEngine>>;

before(async () => {
  [docker, oci] = await Promise.all([gateway({ backend: 'docker' }), gateway({ backend: 'oci' })]);
  const created = await docker.rest('POST', '/sessions', { template: 'bash' });
  assert.equal(created.status, 201, created.text);
  sessionId = created.json.id as string;
  const client = (await docker.mcp()).client;
  // Each prints, then sleeps well past the restart; the oci run ends by itself a few seconds in.
  const running = {
    run: runTool(client, { language: 'bash', code: `echo up; ${sleeper(runMark, 60)}` }),
    exec: docker.rest('POST', `/sessions/${sessionId}/exec`, {
      command: ['bash', '-c', `echo up; ${sleeper(execMark, 60)}`],
    }),
    oci: oci.rest('POST', '/runs', { template: 'bash', code: `${sleeper(ociMark, 8)}\necho survived` }),
  };
  for (const m of [runMark, execMark, ociMark])
    await waitUntil(`${m} running`, () => processesWith(m).length > 0);
  restart = await restartEngine();
  [run, exec, ociRun] = await Promise.all([running.run, running.exec, running.oci]);
  await client.close();
});
after(async () => {
  await Promise.all([docker?.served.stop(), oci?.served.stop()]);
});

async function waitUntil(what: string, probe: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    assert.ok(Date.now() < deadline, `${what} within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('faults: dockerd restarted mid-run and mid-session (live-restore off)', { timeout: 180_000 }, () => {
  test('the engine was restarted: a new dockerd, by PID', (t) => {
    t.diagnostic(`dockerd ${restart.before} → ${restart.after} in ${(restart.ms / 1000).toFixed(1)} s`);
    assert.notEqual(restart.after, restart.before);
  });

  test('a run under way ends Failed (BackendError), saying the engine took it, and is audited', async () => {
    assert.equal(run.phase, 'Failed', JSON.stringify(run));
    assert.equal(run.reason, 'BackendError');
    assert.match(run.message ?? '', /Docker engine stopped or restarted mid-run/);
    assert.equal(run.stdout, 'up\n', 'what it printed before is kept');
    const isIt = (r: AuditRecord): r is RunAuditRecord => r.event === 'run' && r.runId === run.runId;
    const record = (await docker.audit((rs) => rs.some(isIt))).find(isIt);
    assert.deepEqual(record?.outcome, { phase: 'Failed', reason: 'BackendError' });
    assert.equal(record?.exitCode, run.exitCode);
  });

  test('the session ends EngineRestarted, its exec under way fails, and both are audited', async () => {
    assert.equal(exec.status, 200, exec.text);
    assert.equal(exec.json.phase, 'Failed', exec.text);
    assert.equal(exec.json.reason, 'BackendError');
    const session = await docker.rest('GET', `/sessions/${sessionId}`);
    assert.equal(session.json.state, 'Failed', session.text);
    assert.equal(session.json.reason, 'EngineRestarted');
    assert.match(String(session.json.message), /engine stopped or restarted.*live-restore is off/);
    const records = await docker.audit((rs) => rs.some((r) => r.event === 'session.failed'));
    const execRecord = records.find(
      (r): r is ExecAuditRecord => r.event === 'exec' && r.execId === exec.json.execId,
    );
    assert.deepEqual(execRecord?.outcome, { phase: 'Failed', reason: 'BackendError' });
    const ended = records.filter(
      (r): r is SessionAuditRecord =>
        r.event.startsWith('session.') && 'sessionId' in r && r.sessionId === sessionId,
    );
    assert.deepEqual(
      ended.map((r) => [r.event, r.outcome.reason]),
      [
        ['session.created', 'Created'],
        ['session.failed', 'EngineRestarted'],
      ],
    );
  });

  test('nothing of the gateway is left once the engine is back: no container but its idle pools, no process', async () => {
    await onlyLiveContainersOf(docker.served.pid, idlePoolContainer);
    for (const m of [runMark, execMark]) assert.deepEqual(processesWith(m), [], m);
  });

  test('the gateway carries on: the next run and session work', async () => {
    const next = await docker.rest('POST', '/runs', { template: 'python', code: 'print(6 * 7)' });
    assert.equal(next.json.phase, 'Succeeded', next.text);
    assert.equal(next.json.stdout, '42\n');
    const created = await docker.rest('POST', '/sessions', { template: 'bash' });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const again = await docker.rest('POST', `/sessions/${id}/exec`, { command: ['echo', 'again'] });
    assert.equal(again.json.stdout, 'again\n', again.text);
    assert.equal((await docker.rest('DELETE', `/sessions/${id}`)).status, 200);
    const events = (await docker.audit((rs) => rs.some((r) => r.event === 'session.deleted'))).map(
      (r) => r.event,
    );
    assert.ok(
      events.filter((e) => e === 'run').length >= 2 && events.includes('session.deleted'),
      String(events),
    );
  });

  test('stopped, the gateway leaves no container at all', async () => {
    const pid = docker.served.pid;
    await docker.served.stop();
    await onlyLiveContainersOf(pid);
  });

  test('an oci run under way needs no engine: it finishes, audited, and leaves nothing', async () => {
    assert.equal(ociRun.json.phase, 'Succeeded', ociRun.text);
    assert.equal(ociRun.json.stdout, 'survived\n');
    const runId = ociRun.json.runId as string;
    const isIt = (r: AuditRecord): r is RunAuditRecord => r.event === 'run' && r.runId === runId;
    const record = (await oci.audit((rs) => rs.some(isIt))).find(isIt);
    assert.deepEqual(record?.outcome, { phase: 'Succeeded', reason: 'Completed' });
    assert.deepEqual(processesWith(ociMark), []);
    assert.deepEqual(await ociLeftovers(containerId(runId)), []);
  });
});
