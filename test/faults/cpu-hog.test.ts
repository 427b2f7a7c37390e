/**
 * The engine and the gateway slowed by a CPU hog on the host (one busy loop per core, started and
 * ended by this test, by PID): on Docker and on oci at once, a run still finishes, a busy loop past
 * its deadline still ends TimedOut and its sandbox goes, a session's exec past its deadline too
 * while the session goes on; all of it audited, and nothing left behind.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RunAuditRecord } from '../../src/api/audit.js';
import { containerId } from '../../src/backends/oci/layout.js';
import { ociLeftovers } from '../support/oci.js';
import {
  cpuHog,
  gateway,
  marker,
  onlyLiveContainersOf,
  processesWith,
  spinner,
  type Answer,
  type Gateway,
  type Hog,
} from './harness.js';

const BACKENDS = ['docker', 'oci'] as const;
type Backend = (typeof BACKENDS)[number];

/** What one backend's gateway did under the hog. */
interface Work {
  g: Gateway;
  spin: string;
  execSpin: string;
  sessionId: string;
  finished: Answer;
  overdue: Answer;
  exec: Answer;
}

let hog: Hog | undefined;
const work = {} as Record<Backend, Work>;

/** A session, then at once a run, a busy loop past its deadline and an exec past its deadline. */
async function underTheHog(g: Gateway, backend: Backend): Promise<Work> {
  const spin = marker(`hog-${backend}`);
  const execSpin = marker(`hog-exec-${backend}`);
  const session = await g.rest('POST', '/sessions', { template: 'bash' });
  assert.equal(session.status, 201, session.text);
  const sessionId = session.json.id as string;
  const [finished, overdue, exec] = await Promise.all([
    g.rest('POST', '/runs', { template: 'python', code: 'print(sum(range(10**6)))' }),
    g.rest('POST', '/runs', { template: 'bash', code: spinner(spin), timeoutSeconds: 1 }),
    g.rest('POST', `/sessions/${sessionId}/exec`, {
      command: ['bash', '-c', spinner(execSpin)],
      timeoutSeconds: 1,
    }),
  ]);
  return { g, spin, execSpin, sessionId, finished, overdue, exec };
}

before(async () => {
  const [docker, oci] = await Promise.all(
    BACKENDS.map((backend) => gateway({ backend, config: { pool: { enabled: false } } })),
  );
  hog = cpuHog();
  // Both backends at once: the engine's and the gateways' work competes with the hog for the cores.
  [work.docker, work.oci] = await Promise.all([underTheHog(docker!, 'docker'), underTheHog(oci!, 'oci')]);
});
after(async () => {
  await Promise.all(BACKENDS.map((b) => work[b]?.g.served.stop()));
  await hog?.stop();
  for (const pid of hog?.pids ?? []) assert.throws(() => process.kill(pid, 0), 'the hog is gone');
});

async function waitUntil(what: string, probe: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    assert.ok(Date.now() < deadline, `${what} within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

for (const backend of BACKENDS) {
  describe(`faults: the engine slowed by a CPU hog on the host (${backend})`, { timeout: 120_000 }, () => {
    test('a run finishes', () => {
      const { finished } = work[backend];
      assert.equal(finished.json.phase, 'Succeeded', finished.text);
      assert.equal(finished.json.stdout, '499999500000\n');
    });

    test('a busy loop past its deadline ends TimedOut, and its processes go', async () => {
      const { overdue, spin } = work[backend];
      assert.equal(overdue.json.phase, 'TimedOut', overdue.text);
      assert.equal(overdue.json.reason, 'DeadlineExceeded');
      await waitUntil('no process of the overdue run', () => processesWith(spin).length === 0);
    });

    test('a session exec past its deadline ends TimedOut; the session goes on', async () => {
      const { g, exec, execSpin, sessionId } = work[backend];
      assert.equal(exec.json.phase, 'TimedOut', exec.text);
      await waitUntil('no process of the overdue exec', () => processesWith(execSpin).length === 0);
      const next = await g.rest('POST', `/sessions/${sessionId}/exec`, { command: ['echo', 'still'] });
      assert.equal(next.json.stdout, 'still\n', next.text);
      assert.equal((await g.rest('DELETE', `/sessions/${sessionId}`)).status, 200);
    });

    test('every run and exec is audited, and nothing is left once the gateway stops', async () => {
      const { g, finished, overdue, sessionId } = work[backend];
      // The session's end is written just after its DELETE answered.
      const records = await g.audit((rs) => rs.some((r) => r.event === 'session.deleted'));
      const runs = records.filter((r): r is RunAuditRecord => r.event === 'run');
      assert.deepEqual(
        runs.map((r) => [r.runId, r.outcome.phase]).sort(),
        [
          [finished.json.runId, 'Succeeded'],
          [overdue.json.runId, 'TimedOut'],
        ].sort(),
      );
      assert.equal(records.filter((r) => r.event === 'exec').length, 2);
      assert.deepEqual(
        records.filter((r) => r.event.startsWith('session.')).map((r) => r.event),
        ['session.created', 'session.deleted'],
      );
      const pid = g.served.pid;
      await g.served.stop();
      if (backend === 'docker') await onlyLiveContainersOf(pid);
      else
        for (const id of [finished.json.runId, overdue.json.runId, `session-${sessionId}`])
          assert.deepEqual(await ociLeftovers(containerId(String(id))), [], String(id));
    });
  });
}
