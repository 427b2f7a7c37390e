/**
 * The session use cases over an in-memory session backend (test/support/memory-sessions.ts): what the gateway itself decides (caps,
 * ownership, expiry, the exec log, audit records, path and size checks). The real sandboxes are
 * the docker tier's (test/integration/docker/sessions*.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Principal } from '../../../src/gateway/principal.js';
import { AppError, type ErrorCode } from '../../../src/shared/errors.js';
import { pollUntil } from '../../../src/shared/time.js';
import { classify } from '../../../src/api/outcome.js';
import type { FinishedExec, ListedSession } from '../../../src/backends/sessions.js';
import { factsOf } from '../../../src/policy/session.js';
import { MemoryCluster, memorySessions } from '../../support/memory-sessions.js';
import { sessionSpec } from '../../support/sessions.js';

const WAIT = { intervalMs: 50, timeoutMs: 10_000 };
const ALICE: Principal = { id: 'token:a11ce0000000000a', name: 'alice', scope: {} };
const BOB: Principal = { id: 'token:b0b0000000000000b', name: 'bob', scope: {} };

const code =
  (c: ErrorCode, field?: string) =>
  (e: unknown): boolean => {
    assert.ok(e instanceof AppError, String(e));
    assert.equal(e.code, c, e.message);
    if (field)
      assert.ok(
        e.violations.some((v) => v.field === field),
        JSON.stringify(e.violations),
      );
    return true;
  };

describe('session use cases', () => {
  test('the seed body creates a Ready session; secrets show by name only; one created record', async () => {
    const { service, records } = memorySessions();
    const s = await service.sessions.create(
      {
        image: 'python:3.11',
        timeout: 20,
        env: [{ name: 'A', value: '1' }],
        secrets: [{ name: 'KEY', value: 's3cr3t' }],
      },
      ALICE,
    );
    assert.equal(s.state, 'Ready');
    assert.equal(s.limits.timeoutSeconds, 20);
    assert.equal(s.limits.ttlSeconds, 3600);
    assert.deepEqual(s.env.sort(), ['A', 'KEY']);
    assert.ok(!JSON.stringify(s).includes('s3cr3t'));
    assert.ok(!JSON.stringify(records).includes('s3cr3t'));
    assert.deepEqual(
      records.map((r) => [r.event, r.principal, 'sessionId' in r && r.sessionId]),
      [['session.created', 'alice', s.id]],
    );
  });

  test("another principal's session is NOT_FOUND for every operation", async () => {
    const { service } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    await assert.rejects(service.sessions.get(s.id, BOB), code('NOT_FOUND'));
    assert.throws(() => service.sessions.exec(s.id, BOB, { command: ['ls'] }), code('NOT_FOUND'));
    await assert.rejects(service.sessions.readFile(s.id, BOB, { path: 'a' }), code('NOT_FOUND'));
    await assert.rejects(service.sessions.delete(s.id, BOB), code('NOT_FOUND'));
    assert.deepEqual(await service.sessions.list(BOB), []);
    assert.equal((await service.sessions.get(s.id, ALICE)).state, 'Ready');
  });

  test('20 concurrent creates hold the global cap exactly; a token is held to its maxSessions', async () => {
    const { service } = memorySessions({ caps: { max: 16, maxPerPrincipal: 100 } });
    const settled = await Promise.allSettled(
      Array.from({ length: 20 }, () => service.sessions.create({ template: 'python' }, ALICE)),
    );
    assert.equal(settled.filter((r) => r.status === 'fulfilled').length, 16);
    for (const r of settled.filter((x) => x.status === 'rejected')) {
      code('BUSY')(r.reason);
      assert.match((r.reason as AppError).message, /16 live sessions, the server's limit/);
    }
    const small = memorySessions({ caps: { max: 16, maxPerPrincipal: 16 } });
    const capped: Principal = { ...BOB, maxSessions: 2 };
    await small.service.sessions.create({ template: 'python' }, capped);
    await small.service.sessions.create({ template: 'python' }, capped);
    await assert.rejects(small.service.sessions.create({ template: 'python' }, capped), (e: unknown) => {
      code('BUSY')(e);
      assert.match((e as AppError).message, /"bob" already has 2 live sessions, its limit/);
      return true;
    });
    await small.service.sessions.create({ template: 'python' }, ALICE);
  });

  test('an exec result has the run fields plus execId and sessionId; the log keeps the newest; each is audited', async () => {
    const { service, records } = memorySessions({ caps: { logExecs: 3 } });
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    const results = [];
    for (let i = 0; i < 5; i++) {
      results.push(await service.sessions.exec(s.id, ALICE, { command: ['echo', String(i)] }).result);
    }
    const last = results[4];
    assert.ok(last);
    assert.equal(last.phase, 'Succeeded');
    assert.equal(last.stdout, 'echo 4\n');
    assert.equal(last.sessionId, s.id);
    assert.match(last.execId, /^exec-[0-9a-f]{12}$/);
    assert.ok(!('runId' in last));
    assert.deepEqual(
      (await service.sessions.logs(s.id, ALICE)).map((e) => e.result.stdout),
      ['echo 2\n', 'echo 3\n', 'echo 4\n'],
    );
    assert.equal((await service.sessions.get(s.id, ALICE)).execs, 5);
    assert.equal(records.filter((r) => r.event === 'exec').length, 5);
  });

  test('execs another gateway ran come from the runner’s history: in the log in order, each once, not audited again', async () => {
    const { service, sandboxes, records } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    const here = await service.sessions.exec(s.id, ALICE, { command: ['echo', 'here'] }).result;
    const finished = (execId: string, text: string, endsIn: number): FinishedExec => ({
      execId,
      argv: ['echo', text],
      background: false,
      timeoutSeconds: 20,
      outcome: {
        outcome: classify({ exitCode: 0, timedOut: false, oomKilled: false, cancelled: false }),
        stdout: { text, bytes: text.length, truncated: false, binary: false },
        stderr: { text: '', bytes: 0, truncated: false, binary: false },
        startedAt: Date.now() - 1000,
        finishedAt: Date.now() + endsIn,
      },
    });
    // The runner keeps this server's exec too (it took its report): it is not listed twice.
    sandboxes[0]!.kept = [
      finished('exec-before', 'before\n', -60_000),
      finished(here.execId, 'here\n', -1),
      finished('exec-after', 'after\n', 1000),
    ];
    assert.deepEqual(
      (await service.sessions.logs(s.id, ALICE)).map((e) => [e.execId, e.result.stdout]),
      [
        ['exec-before', 'before\n'],
        [here.execId, 'echo here\n'],
        ['exec-after', 'after\n'],
      ],
    );
    const after = await service.sessions.execResult(s.id, 'exec-after', ALICE);
    assert.equal(after.phase, 'Succeeded');
    assert.equal(after.sessionId, s.id);
    assert.equal(after.limits?.timeoutSeconds, 20);
    await assert.rejects(service.sessions.execResult(s.id, 'exec-none', ALICE), code('NOT_FOUND'));
    await assert.rejects(service.sessions.logs(s.id, BOB), code('NOT_FOUND'));
    assert.equal(records.filter((r) => r.event === 'exec').length, 1, 'audited where they ran');
  });

  test('the list adds the sessions the backend has a record of; one this server serves keeps its own view', async () => {
    const facts = factsOf(sessionSpec({ template: 'python', env: [{ name: 'A', value: '1' }] }));
    const record = (sessionId: string, state: 'Ready' | 'Failed'): ListedSession => ({
      sessionId,
      spec: facts,
      envNames: ['A'],
      state,
      reason: state === 'Ready' ? 'Created' : 'ContainerFailed',
      message: undefined,
      createdAt: Date.now() - 5000,
      lastActivityAt: Date.now() - 1000,
      endedAt: undefined,
    });
    let mine: ListedSession[] = [];
    const { service, sandboxes } = memorySessions({ listed: (p) => (p === ALICE.id ? mine : []) });
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    mine = [record(s.id, 'Failed'), record('ses-00000000000000aa', 'Ready')];
    const listed = await service.sessions.list(ALICE);
    assert.deepEqual(
      listed.map((x) => [x.id, x.state]),
      [
        [s.id, 'Ready'],
        ['ses-00000000000000aa', 'Ready'],
      ],
    );
    const elsewhere = listed[1]!;
    assert.equal(elsewhere.image, facts.image);
    assert.deepEqual(elsewhere.env, ['A']);
    assert.equal(elsewhere.limits.ttlSeconds, facts.ttlSeconds);
    assert.equal(elsewhere.backend, 'docker');
    assert.deepEqual(await service.sessions.list(BOB), []);
    assert.equal(sandboxes.length, 1, 'listing attached to nothing');
  });

  test('a background exec returns at once, is Running until killed, then its result is kept', async () => {
    const { service } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    const handle = service.sessions.exec(s.id, ALICE, { command: ['sleep', '60'], background: true });
    assert.equal((await service.sessions.execResult(s.id, handle.execId, ALICE)).phase, 'Running');
    assert.deepEqual((await service.sessions.get(s.id, ALICE)).runningExecs, [handle.execId]);
    await service.sessions.killExec(s.id, handle.execId, ALICE);
    assert.equal((await service.sessions.execResult(s.id, handle.execId, ALICE)).phase, 'Succeeded');
  });

  test('concurrent execs past the session limit are BUSY', async () => {
    const { service } = memorySessions({ policy: { sessions: { maxExecs: 2 } } });
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    service.sessions.exec(s.id, ALICE, { command: ['sleep', '1'], background: true });
    service.sessions.exec(s.id, ALICE, { command: ['sleep', '1'], background: true });
    assert.throws(() => service.sessions.exec(s.id, ALICE, { command: ['ls'] }), code('BUSY'));
  });

  test('the TTL ends the session Expired (TTLExpired), removes the sandbox, and is audited', async () => {
    const { service, sandboxes, records } = memorySessions();
    const s = await service.sessions.create({ template: 'python', ttlSeconds: 1 }, ALICE);
    assert.ok(
      await pollUntil(async () => (await service.sessions.get(s.id, ALICE)).state === 'Expired', WAIT),
    );
    const view = await service.sessions.get(s.id, ALICE);
    assert.equal(view.reason, 'TTLExpired');
    assert.equal(sandboxes[0]?.closedWith, 'TTLExpired');
    assert.ok(records.some((r) => r.event === 'session.expired' && r.outcome.reason === 'TTLExpired'));
    assert.throws(() => service.sessions.exec(s.id, ALICE, { command: ['ls'] }), code('NOT_FOUND'));
  });

  test('idle time ends a session that does nothing; activity keeps it alive', async () => {
    const { service } = memorySessions();
    const s = await service.sessions.create({ template: 'python', idleTimeoutSeconds: 1 }, ALICE);
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 500));
      await service.sessions.listFiles(s.id, ALICE);
    }
    assert.equal((await service.sessions.get(s.id, ALICE)).state, 'Ready');
    assert.ok(
      await pollUntil(async () => (await service.sessions.get(s.id, ALICE)).reason === 'IdleExpired', WAIT),
    );
  });

  test("where other replicas serve the session too, one replica's deadline only asks the backend: it lives on while another serves it, and its end is audited once, by the replica that held it last", async () => {
    const cluster = new MemoryCluster();
    const a = memorySessions({ replicaOf: { cluster, replica: 'gw-a', endCheckMs: 50 } });
    const b = memorySessions({ replicaOf: { cluster, replica: 'gw-b', endCheckMs: 50 } });
    const s = await a.service.sessions.create({ template: 'python', idleTimeoutSeconds: 1 }, ALICE);
    const asksOf = (replica: string) => cluster.sessions.get(s.id)?.asked.filter((r) => r === replica).length;
    const stateOn = async (r: typeof a) => (await r.service.sessions.list(ALICE))[0]?.state;
    // B serves the session while A's idle deadline (1 s after creation) passes.
    for (let i = 0; i < 4; i++) {
      await b.service.sessions.listFiles(s.id, ALICE);
      if (i === 1) assert.equal(asksOf('gw-a'), 0, 'A asks nothing before its deadline');
      await new Promise((r) => setTimeout(r, 400));
    }
    assert.ok((asksOf('gw-a') ?? 0) >= 2, 'past its deadline, A asked, and asked again');
    assert.equal(await stateOn(a), 'Ready');
    assert.equal(a.sandboxes[0]?.closedWith, undefined, 'A left the sandbox alone');
    assert.deepEqual(
      a.records.map((r) => r.event),
      ['session.created'],
    );

    cluster.endSession(s.id, { reason: 'IdleExpired', message: 'nothing happened for 1 s' });
    assert.ok(await pollUntil(async () => (await stateOn(a)) === 'Expired', WAIT), 'A ends it by its timer');
    assert.ok(await pollUntil(async () => (await stateOn(b)) === 'Expired', WAIT), 'B ends it by its timer');
    assert.equal((await a.service.sessions.get(s.id, ALICE)).reason, 'IdleExpired');
    const expired = (r: typeof a) => r.records.filter((x) => x.event === 'session.expired').length;
    assert.deepEqual([expired(a), expired(b)], [0, 1], 'audited by B, which held it last, only');
  });

  test('a sandbox that dies by itself ends the session Failed with its reason', async () => {
    const { service, sandboxes, records } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    sandboxes[0]?.die({ reason: 'OOMKilled', message: 'the runner was killed' });
    assert.ok(
      await pollUntil(async () => (await service.sessions.get(s.id, ALICE)).state === 'Failed', WAIT),
    );
    assert.equal((await service.sessions.get(s.id, ALICE)).reason, 'OOMKilled');
    assert.ok(records.some((r) => r.event === 'session.failed'));
  });

  test('an end another replica made and recorded (deleted through it) ends the session here, audited and counted once there only', async () => {
    const { service, sandboxes, records, metrics } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    const before = records.length;
    sandboxes[0]?.die({ reason: 'Deleted', message: 'its Sandbox is gone', recordedElsewhere: true });
    assert.ok(
      await pollUntil(async () => (await service.sessions.get(s.id, ALICE)).state === 'Deleted', WAIT),
    );
    assert.deepEqual(records.slice(before), [], 'no second audit record');
    const ended = await metrics.registry.getSingleMetricAsString('sandpit_sessions_ended_total');
    assert.doesNotMatch(ended, /reason="Deleted"/);
  });

  test('paths that leave the workspace are INVALID_REQUEST naming the field, before the sandbox is asked', async () => {
    const { service, sandboxes } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    for (const path of ['../etc/passwd', '/etc/passwd', 'a/../../b', 'x\0y', `${'n'.repeat(256)}`]) {
      await assert.rejects(
        service.sessions.writeFile(s.id, ALICE, { path, content: Buffer.from('x') }),
        code('INVALID_REQUEST', 'path'),
      );
    }
    assert.equal(sandboxes[0]?.files.size, 0);
    await service.sessions.writeFile(s.id, ALICE, {
      path: '/workspace/ok.txt',
      content: Buffer.from('fine'),
    });
    assert.deepEqual([...(sandboxes[0]?.files.keys() ?? [])], ['ok.txt']);
  });

  test('an exec the sandbox refuses as sent (a cwd that is a symlink out) ends Rejected by policy, naming the field, not a backend error', async () => {
    const { service, metrics } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    const result = await service.sessions.exec(s.id, ALICE, { command: ['pwd'], cwd: 'link-out' }).result;
    assert.equal(result.phase, 'Rejected');
    assert.equal(result.reason, 'PolicyDenied');
    assert.match(result.message ?? '', /^cwd: link-out is a symlink that leads out of the workspace/);
    assert.equal(result.exitCode, null);
    const counted = await metrics.registry.getSingleMetricAsString('sandpit_session_execs_total');
    assert.match(counted, /phase="Rejected",reason="PolicyDenied"/);
    assert.doesNotMatch(counted, /BackendError/);
  });

  test('an exec in a cwd that does not exist ends Rejected, naming the field, not a retryable backend error', async () => {
    const { service, metrics } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    const result = await service.sessions.exec(s.id, ALICE, { command: ['pwd'], cwd: 'no-such-dir' }).result;
    assert.equal(result.phase, 'Rejected');
    assert.equal(result.reason, 'PolicyDenied');
    assert.match(result.message ?? '', /^cwd: no-such-dir: No such file or directory/);
    assert.equal(result.exitCode, null);
    const counted = await metrics.registry.getSingleMetricAsString('sandpit_session_execs_total');
    assert.doesNotMatch(counted, /BackendError/);
  });

  test('a file over the download limit is TOO_LARGE; an upload over the workspace too', async () => {
    const { service } = memorySessions({ policy: { ceilings: { downloadBytes: 4, workspaceBytes: 1024 } } });
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    await service.sessions.writeFile(s.id, ALICE, { path: 'big', content: Buffer.from('12345') });
    await assert.rejects(service.sessions.readFile(s.id, ALICE, { path: 'big' }), code('TOO_LARGE', 'path'));
    await assert.rejects(
      service.sessions.writeFile(s.id, ALICE, { path: 'huge', content: Buffer.alloc(2048) }),
      code('TOO_LARGE', 'content'),
    );
  });

  test('extending past the ceiling is POLICY_DENIED; within it the sandbox is told', async () => {
    const { service, sandboxes } = memorySessions();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    await assert.rejects(
      service.sessions.extend(s.id, ALICE, { ttlSeconds: 90_000 }),
      code('POLICY_DENIED', 'ttlSeconds'),
    );
    const after = await service.sessions.extend(s.id, ALICE, { ttlSeconds: 7200 });
    assert.equal(after.limits.ttlSeconds, 7200);
    assert.equal(sandboxes[0]?.ttl, 7200);
  });

  test('deleting ends the session Deleted; the list still shows it; shutdown can end the rest', async () => {
    const { service, sandboxes } = memorySessions();
    const a = await service.sessions.create({ template: 'python' }, ALICE);
    await service.sessions.create({ template: 'python' }, ALICE);
    assert.equal((await service.sessions.delete(a.id, ALICE)).state, 'Deleted');
    assert.deepEqual((await service.sessions.list(ALICE)).map((x) => x.state).sort(), ['Deleted', 'Ready']);
    await service.shutdown({ endSessions: true });
    assert.deepEqual(
      sandboxes.map((x) => x.closedWith),
      ['Deleted', 'Deleted'],
    );
  });

  test('a backend without sessions says so (UNSUPPORTED)', async () => {
    const { service } = memorySessions({ sessions: false });
    await assert.rejects(service.sessions.create({ template: 'python' }, ALICE), code('UNSUPPORTED'));
  });

  test('a bad request names its fields and creates nothing', async () => {
    const { service, sandboxes } = memorySessions();
    await assert.rejects(
      service.sessions.create({ image: 'python:3.11', timeout: 'x' }, ALICE),
      code('INVALID_REQUEST', 'timeoutSeconds'),
    );
    await assert.rejects(
      service.sessions.create({ image: 'evil/image:1' }, ALICE),
      code('POLICY_DENIED', 'image'),
    );
    assert.equal(sandboxes.length, 0);
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    assert.throws(
      () => service.sessions.exec(s.id, ALICE, { command: 'ls' }),
      code('INVALID_REQUEST', 'command'),
    );
  });
});
