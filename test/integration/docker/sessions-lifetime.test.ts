/**
 * Sessions outlive their gateway, within their lifetime: a gateway killed with SIGKILL is
 * replaced by one of the same instance that adopts its sessions (same ids and files, the exec in
 * flight reported from the runner's buffer, the execs it ran before in the runner's history, the
 * next exec working); the history is bounded in bytes, the newest kept; and a session nobody attaches
 * to stops by itself at its TTL (the one setTtl extended it to) or idle timeout, its runner
 * enforcing them with no gateway at all.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { after, describe, test } from 'node:test';
import { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { HISTORY_BYTES, RETAINED_OUTPUT_BYTES } from '../../../src/runner/session-protocol.js';
import { requireDocker } from '../../support/docker.js';
import {
  eventually,
  MiB,
  readAll,
  runExec,
  sessionContainers,
  sessionId,
  sessionPolicy,
  sessionSpec,
} from '../../support/sessions.js';

const instanceId = `test-instance-${process.pid}`;
const backends: DockerBackend[] = [];
after(async () => {
  await Promise.all(backends.map((b) => b.close()));
  const docker = await requireDocker();
  for (const c of await docker.listContainers({
    all: true,
    filters: { label: [`sandpit.dev/instance=${instanceId}`] },
  }))
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => {});
});

async function exitCodeWhenStopped(id: string, ms: number): Promise<number | undefined> {
  const docker = await requireDocker();
  let code: number | undefined;
  await eventually(async () => {
    const [c] = await sessionContainers(docker, id);
    if (!c || c.State === 'running') return false;
    code = (await docker.getContainer(c.Id).inspect()).State.ExitCode;
    return true;
  }, ms);
  return code;
}

describe('sessions and their gateway', () => {
  test('a SIGKILLed gateway’s session is adopted by the next of its instance: same id and files, the exec in flight reports', async () => {
    const id = sessionId('adopt');
    const owner = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/support/session-owner.ts', instanceId, id],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const [line] = (await once(createInterface({ input: owner.stdout }), 'line')) as [string];
    assert.deepEqual(JSON.parse(line), { sessionId: id, principal: 'owner' });
    owner.kill('SIGKILL');
    await once(owner, 'exit');

    const backend = new DockerBackend({ docker: await requireDocker(), instanceId });
    backends.push(backend);
    await backend.reap();
    const { adopted, lost } = await backend.sessions.adoptSessions();
    assert.deepEqual(lost, []);
    const found = adopted.find((a) => a.sessionId === id);
    assert.ok(found, `adopted ${JSON.stringify(adopted.map((a) => a.sessionId))}`);
    assert.equal(found.principal, 'owner');
    const kept = await found.sandbox.readFile({ path: 'kept.txt', maxBytes: MiB });
    assert.equal((await readAll(kept.data)).toString(), 'still here\n');
    assert.equal(found.execs.length, 1, 'the exec in flight');
    const r = await found.execs[0]!.result;
    assert.equal(r.outcome.exitCode, 7);
    assert.match(r.stdout.text, /late\n$/, 'its output, from the runner’s buffer');
    // The runner's history: the exec the killed gateway took the report of, then the one this one took.
    let history = await found.sandbox.history();
    assert.ok(
      await eventually(async () => (history = await found.sandbox.history()).length === 2, 10_000),
      JSON.stringify(history.map((h) => h.execId)),
    );
    assert.deepEqual(
      history.map((h) => [h.execId, h.outcome.outcome.exitCode, h.outcome.stdout.text]),
      [
        ['before', 2, 'before\n'],
        ['inflight', 7, 'early\nlate\n'],
      ],
    );
    const next = await runExec(found.sandbox, found.spec, { command: ['cat', 'kept.txt'] });
    assert.equal(next.stdout.text, 'still here\n');
    await found.sandbox.close('Deleted');
    assert.deepEqual(await sessionContainers(backend.docker, id), []);
  });

  test('the runner keeps the execs a gateway took, HISTORY_BYTES in all: the oldest go, the newest stays, each as it ran', async () => {
    const backend = new DockerBackend({ docker: await requireDocker(), instanceId });
    backends.push(backend);
    const policy = sessionPolicy();
    const spec = sessionSpec({ template: 'bash' }, policy);
    const sandbox = await backend.sessions.createSession(spec, {
      sessionId: sessionId('history'),
      principal: 'p',
    });
    try {
      const first = await runExec(sandbox, spec, { shell: 'echo first; echo oops >&2' }, { execId: 'first' });
      // Each keeps its last RETAINED_OUTPUT_BYTES of stdout: more than HISTORY_BYTES in all.
      const runs = Math.ceil(HISTORY_BYTES / RETAINED_OUTPUT_BYTES) + 2;
      for (let i = 0; i < runs; i++)
        await runExec(
          sandbox,
          spec,
          { shell: `head -c ${2 * RETAINED_OUTPUT_BYTES} /dev/zero | tr '\\0' ${i % 10}` },
          { execId: `big-${i}` },
        );
      const history = await sandbox.history();
      const ids = history.map((h) => h.execId);
      assert.equal(ids.at(-1), `big-${runs - 1}`, 'the newest');
      assert.ok(!ids.includes('first'), `the oldest went first: ${ids.join(' ')}`);
      const kept = history.reduce((n, h) => n + h.outcome.stdout.text.length, 0);
      assert.ok(kept <= HISTORY_BYTES, `${kept} bytes of output kept`);
      assert.ok(history.length >= runs - 4, `${history.length} of ${runs} kept`);
      const last = history.at(-1)!.outcome.stdout;
      assert.equal(last.bytes, 2 * RETAINED_OUTPUT_BYTES);
      assert.equal(last.truncated, true);
      assert.ok(last.text.endsWith(String((runs - 1) % 10).repeat(RETAINED_OUTPUT_BYTES)));
      // Small output reads back as it ran.
      const small = await runExec(sandbox, spec, { shell: 'echo first; echo oops >&2' }, { execId: 'small' });
      const again = (await sandbox.history()).find((h) => h.execId === 'small');
      assert.deepEqual([again?.outcome.stdout, again?.outcome.stderr], [small.stdout, small.stderr]);
      assert.deepEqual(small.stdout, first.stdout);
    } finally {
      await sandbox.close('Deleted');
    }
  });

  test('a TTL that setTtl extended is the one the runner enforces, with no gateway at all', async () => {
    const backend = new DockerBackend({ docker: await requireDocker(), instanceId });
    const id = sessionId('extended');
    const spec = sessionSpec({ template: 'bash', ttlSeconds: 3 }, sessionPolicy());
    const before = Date.now();
    const sandbox = await backend.sessions.createSession(spec, { sessionId: id, principal: 'p' });
    const opened = Date.now();
    await sandbox.setTtl(7);
    await backend.close(); // let go, still running
    await new Promise((r) => setTimeout(r, Math.max(0, opened + 4500 - Date.now())));
    const [c] = await sessionContainers(backend.docker, id);
    assert.equal(c?.State, 'running', 'alive past its first TTL');
    assert.equal(await exitCodeWhenStopped(id, 15_000), 3, "the runner's exit status for its TTL");
    const { State } = await backend.docker.getContainer(c.Id).inspect();
    const stopped = Date.parse(State.FinishedAt);
    assert.ok(stopped >= before + 7000, `stopped ${stopped - before} ms after the create began`);
    assert.ok(stopped <= opened + 7000 + 2000, `stopped ${stopped - opened} ms after the open`);
    await backend.docker.getContainer(c.Id).remove({ force: true });
  });

  for (const [what, request, code] of [
    ['TTL', { ttlSeconds: 3 }, 3],
    ['idle timeout', { idleTimeoutSeconds: 2 }, 4],
  ] as const) {
    test(`with no gateway at all, a session stops by itself at its ${what}`, async () => {
      const backend = new DockerBackend({ docker: await requireDocker(), instanceId });
      const id = sessionId('alone');
      const spec = sessionSpec({ template: 'bash', ...request }, sessionPolicy());
      const sandbox = await backend.sessions.createSession(spec, { sessionId: id, principal: 'p' });
      await runExec(sandbox, spec, { command: ['true'] });
      await backend.close(); // an instance's sessions are let go, still running
      const [c] = await sessionContainers(backend.docker, id);
      assert.equal(c?.State, 'running', 'let go, not ended');
      assert.equal(await exitCodeWhenStopped(id, 15_000), code, `the runner's exit status for its ${what}`);
      await backend.docker.getContainer(c.Id).remove({ force: true });
    });
  }
});
