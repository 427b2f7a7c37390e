/**
 * A `sandpit serve` killed with SIGKILL while a run is under way (and, on Docker, while it holds
 * sessions), then started again as itself (the same instance id, state directory and audit file).
 * The run's sandbox ends with its gateway; the restarted one reaps what is left and audits the run
 * (Failed, BackendError). On Docker the live session is adopted (the same id and files, and the
 * next exec works, under its principal's name), and the one whose sandbox died meanwhile is removed
 * with an audit record that still names its principal, image and limits.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { AuditRecord, RunAuditRecord, SessionAuditRecord } from '../../src/api/audit.js';
import { SESSION_NAME_PREFIX } from '../../src/backends/docker/session/docker-sessions.js';
import { containerId } from '../../src/backends/oci/layout.js';
import { requireDocker } from '../support/docker.js';
import { ociLeftovers } from '../support/oci.js';
import {
  containersOf,
  gateway,
  idlePoolContainer,
  marker,
  onlyLiveContainersOf,
  processesWith,
  PRINCIPAL,
  sleeper,
  type Gateway,
} from './harness.js';

type Restartable = Awaited<ReturnType<typeof gateway>>;

/** Starts a run nobody waits for (its id comes back at once), sleeping as `mark` until the kill. */
async function runUnderWay(g: Gateway, mark: string): Promise<string> {
  const started = await g.rest('POST', '/runs?wait=false', {
    template: 'bash',
    code: `echo up; ${sleeper(mark, 60)}`,
  });
  assert.equal(started.status, 202, started.text);
  await waitUntil(`${mark} running`, () => processesWith(mark).length > 0);
  return started.json.runId as string;
}

/** Kills the gateway with SIGKILL (by its PID) and waits until it is gone. */
async function kill(g: Gateway): Promise<void> {
  process.kill(g.served.pid, 'SIGKILL');
  await g.served.stop();
}

async function waitUntil(what: string, probe: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    assert.ok(Date.now() < deadline, `${what} within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The run's record in the trail: what the restarted gateway wrote for it. */
async function lostRun(g: Gateway, runId: string): Promise<RunAuditRecord | undefined> {
  const isIt = (r: AuditRecord): r is RunAuditRecord => r.event === 'run' && r.runId === runId;
  return (await g.audit((rs) => rs.some(isIt))).find(isIt);
}

describe(
  'faults: the gateway killed with SIGKILL mid-run and restarted (Docker)',
  { timeout: 180_000 },
  () => {
    const mark = marker('killed-docker');
    let first: Restartable;
    let again: Gateway;
    let runId: string;
    let kept: string;
    let dies: string;

    before(async () => {
      first = await gateway({ backend: 'docker', config: { pool: { enabled: false } } });
      const created = await Promise.all(
        ['kept', 'dies'].map(async () => {
          const r = await first.rest('POST', '/sessions', { template: 'bash', ttlSeconds: 900 });
          assert.equal(r.status, 201, r.text);
          return r.json.id as string;
        }),
      );
      [kept, dies] = created as [string, string];
      const put = await first.put(`/sessions/${kept}/files/note.txt`, 'still here');
      assert.equal(put.status, 201, put.text);
      runId = await runUnderWay(first, mark);
      await kill(first);
      // Meanwhile one session's sandbox dies too.
      const docker = await requireDocker();
      const [victim] = await docker.listContainers({
        all: true,
        filters: { name: [`${SESSION_NAME_PREFIX}${dies}`] },
      });
      assert.ok(victim, 'the session container is there after the gateway died');
      await docker.getContainer(victim.Id).kill();
      again = await first.again();
    });
    after(() => again?.served.stop());

    test('the run’s sandbox ends with its gateway', async () => {
      // Its deadline is far: only the end of its runner's stdin, closed with the gateway, stops it.
      await waitUntil('no process of the run left', () => processesWith(mark).length === 0, 10_000);
    });

    test('the restarted gateway audits the run: Failed, BackendError, no exit code, its principal', async () => {
      const record = await lostRun(again, runId);
      assert.ok(record, `no record of ${runId}`);
      assert.deepEqual(record.outcome, { phase: 'Failed', reason: 'BackendError' });
      assert.equal(record.exitCode, null);
      assert.equal(record.principal, PRINCIPAL);
      assert.equal(record.template, 'bash');
    });

    test('the live session is adopted: the same id and files, and the next exec works under its principal', async () => {
      const note = await again.rest('GET', `/sessions/${kept}/files/note.txt`);
      assert.equal(note.status, 200, note.text);
      assert.equal(note.text, 'still here');
      const exec = await again.rest('POST', `/sessions/${kept}/exec`, { command: ['cat', 'note.txt'] });
      assert.equal(exec.json.exitCode, 0, exec.text);
      assert.equal(exec.json.stdout, 'still here');
      // The exec's record is written once its result is sent: wait for it.
      const records = await again.audit((rs) => rs.some((r) => r.event === 'exec' && r.sessionId === kept));
      const execRecord = records.find((r) => r.event === 'exec' && r.sessionId === kept);
      assert.equal(execRecord?.principal, PRINCIPAL, 'the adopted session keeps its principal’s name');
    });

    test('the session whose sandbox died meanwhile is removed, with a record naming its principal and image', async () => {
      assert.equal((await again.rest('GET', `/sessions/${dies}`)).status, 404);
      const isEnd = (r: AuditRecord): r is SessionAuditRecord =>
        r.event !== 'session.created' && 'sessionId' in r && r.sessionId === dies;
      const ended = (await again.audit((rs) => rs.some(isEnd))).find(isEnd);
      assert.ok(ended, `no end record for ${dies}`);
      assert.equal(ended.event, 'session.failed');
      assert.equal(ended.principal, PRINCIPAL);
      assert.ok(ended.image.length > 0);
    });

    test('nothing else is left: the killed gateway’s containers but the adopted session are gone', async () => {
      await onlyLiveContainersOf(first.served.pid, (c) => c.name === `${SESSION_NAME_PREFIX}${kept}`);
      assert.deepEqual(
        (await containersOf(again.served.pid)).filter((c) => !idlePoolContainer(c)),
        [],
        'the restarted one runs nothing else',
      );
    });

    test('the next run works, and the adopted session ends when deleted', async () => {
      const next = await again.rest('POST', '/runs', { template: 'bash', code: 'echo next' });
      assert.equal(next.json.phase, 'Succeeded', next.text);
      assert.equal((await again.rest('DELETE', `/sessions/${kept}`)).status, 200);
      const pid = again.served.pid;
      await again.served.stop();
      await onlyLiveContainersOf(pid);
      await onlyLiveContainersOf(first.served.pid);
    });
  },
);

describe('faults: the gateway killed with SIGKILL mid-run and restarted (oci)', { timeout: 120_000 }, () => {
  const mark = marker('killed-oci');
  let first: Restartable;
  let again: Gateway;
  let runId: string;

  before(async () => {
    first = await gateway({ backend: 'oci' });
    runId = await runUnderWay(first, mark);
    await kill(first);
    again = await first.again();
  });
  after(() => again?.served.stop());

  test('the run’s sandbox ends with its gateway, and the restarted one’s reaper removes the rest', async () => {
    await waitUntil('no process of the run left', () => processesWith(mark).length === 0, 10_000);
    assert.deepEqual(await ociLeftovers(containerId(runId)), []);
  });

  test('the restarted gateway audits the run: Failed, BackendError, no exit code', async () => {
    const record = await lostRun(again, runId);
    assert.ok(record, `no record of ${runId}`);
    assert.deepEqual(record.outcome, { phase: 'Failed', reason: 'BackendError' });
    assert.equal(record.exitCode, null);
    assert.equal(record.backend, 'oci');
  });

  test('the next run works', async () => {
    const next = await again.rest('POST', '/runs', { template: 'bash', code: 'echo next' });
    assert.equal(next.json.phase, 'Succeeded', next.text);
  });
});
