/**
 * Sessions through the gateway's use cases on the real engine (cold, or with warm pools): 20
 * concurrent creates hold the global and the per-token cap exactly and leak no container; TTL and
 * idle expiry remove the container within 5 s of the expiry instant (a PATCH first extending the
 * TTL); a container killed from outside, and a runner the OOM killer took, end their session
 * Failed with the reason, audited.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import type { SessionAuditRecord } from '../../../src/api/audit.js';
import type { Session } from '../../../src/api/session.js';
import { LABELS } from '../../../src/backends/docker/labels.js';
import { currentOwner } from '../../../src/backends/docker/owner.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';
import { readAuditFile } from '../../support/audit.js';
import { POOLS_ON, requireDocker } from '../../support/docker.js';
import { parseMetrics, sampleValue } from '../../support/prometheus.js';
import { dockerService, principal, type DockerService } from '../../support/service.js';
import { eventually, MiB, sessionContainers } from '../../support/sessions.js';

/** The product's promise: an ended session's container is gone this soon after the end. */
const REMOVED_WITHIN_MS = 5000;

const dir = mkdtempSync(join(tmpdir(), 'sandpit-sessions-service-'));
let docker: Docker;
const services: DockerService[] = [];

before(async () => {
  docker = await requireDocker();
});
after(async () => {
  await Promise.all(services.map((s) => s.service.shutdown({ endSessions: true })));
  rmSync(dir, { recursive: true, force: true });
});

async function serviceFor(name: string, options: Parameters<typeof dockerService>[0] = {}) {
  const auditPath = join(dir, name, 'audit.jsonl');
  const s = await dockerService({ docker, auditPath, ...options });
  await s.audit.open();
  services.push(s);
  return { ...s, auditPath };
}

/** The session events of `sessionId` in an audit file, once `count` of them are written. */
async function sessionEvents(path: string, sessionId: string, count: number): Promise<SessionAuditRecord[]> {
  let found: SessionAuditRecord[] = [];
  await eventually(() => {
    found = readAuditFile(path).filter(
      (r): r is SessionAuditRecord =>
        r.event.startsWith('session.') && 'sessionId' in r && r.sessionId === sessionId,
    );
    return found.length >= count;
  }, 5000);
  return found;
}

/** The session's container, once the engine lists it under its name or label. */
async function containerOf(sessionId: string): Promise<string> {
  let id: string | undefined;
  const found = await eventually(async () => {
    id = (await sessionContainers(docker, sessionId))[0]?.Id;
    return id !== undefined;
  }, 10_000);
  assert.ok(found && id, `session ${sessionId} has a container`);
  return id;
}

/** When the engine no longer knows the container (epoch ms), polling every 50 ms for up to `ms`. */
async function goneAt(containerId: string, ms: number): Promise<number | undefined> {
  let at: number | undefined;
  await eventually(
    async () => {
      try {
        await docker.getContainer(containerId).inspect();
        return false;
      } catch (e) {
        if ((e as { statusCode?: number }).statusCode !== 404) throw e;
        at = Date.now();
        return true;
      }
    },
    ms,
    50,
  );
  return at;
}

/** Session containers of this test process's services (cold or claimed from a pool), by name. */
/** This process's session containers (another checkout's on the same engine are not ours to count). */
async function liveSessionContainers(): Promise<string[]> {
  const all = await docker.listContainers({
    all: true,
    filters: { label: [`${LABELS.mode}=session`, `${LABELS.owner}=${currentOwner()}`] },
  });
  return all.flatMap((c) => c.Names).filter((n) => n.startsWith('/sandpit-session-ses-'));
}

async function refusal(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof AppError, `an AppError, not ${String(e)}`);
    return e;
  }
  assert.fail('expected a refusal');
}

describe('caps under 20 concurrent creates', () => {
  test('the global cap: exactly N succeed, the rest are BUSY naming it, and no container leaks', async () => {
    const { service, metrics } = await serviceFor('global', { sessions: { max: 5, maxPerPrincipal: 16 } });
    const callers = Array.from({ length: 20 }, (_, i) => principal(`caller-${i}`));
    const outcomes = await Promise.allSettled(
      callers.map((p) => service.sessions.create({ template: 'bash' }, p)),
    );
    const made = outcomes.flatMap((o, i) =>
      o.status === 'fulfilled' ? [[o.value, callers[i]!] as const] : [],
    );
    assert.equal(made.length, 5, 'exactly the cap');
    for (const o of outcomes) {
      if (o.status === 'fulfilled') continue;
      assert.ok(o.reason instanceof AppError && o.reason.code === 'BUSY', String(o.reason));
      assert.match(o.reason.message, /5 live sessions, the server's limit/);
    }
    assert.ok(
      await eventually(async () => (await liveSessionContainers()).length === 5, 10_000),
      `one container per session: ${JSON.stringify(await liveSessionContainers())}`,
    );
    const scrape = await parseMetrics(await metrics.registry.metrics());
    const created = (served: string) =>
      sampleValue(scrape, 'sandpit_sessions_created_total', { backend: 'docker', served });
    assert.equal(created('warm') + created('cold'), 5);
    if (POOLS_ON) assert.ok(created('warm') >= 1, 'the pooled ones are counted warm');
    else assert.equal(created('cold'), 5);
    assert.equal(sampleValue(scrape, 'sandpit_sessions', { backend: 'docker' }), 5);
    await Promise.all(made.map(([s, p]) => service.sessions.delete(s.id, p)));
    assert.deepEqual(await liveSessionContainers(), [], 'none left once they are deleted');
  });

  test("the per-token cap: exactly its maxSessions succeed, the rest BUSY naming the token; another token's go on", async () => {
    const { service } = await serviceFor('per-token', { sessions: { max: 16, maxPerPrincipal: 16 } });
    const bob = principal('bob', 3);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, () => service.sessions.create({ template: 'bash' }, bob)),
    );
    const made = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    assert.equal(made.length, 3, "exactly bob's maxSessions");
    for (const o of outcomes) {
      if (o.status === 'fulfilled') continue;
      assert.ok(o.reason instanceof AppError && o.reason.code === 'BUSY', String(o.reason));
      assert.match(o.reason.message, /"bob" already has 3 live sessions, its limit/);
    }
    const carol = principal('carol');
    const hers = await service.sessions.create({ template: 'bash' }, carol);
    assert.equal(hers.state, 'Ready', 'the cap is per token');
    assert.ok(await eventually(async () => (await liveSessionContainers()).length === 4, 10_000));
    await Promise.all([
      ...made.map((s) => service.sessions.delete(s.id, bob)),
      service.sessions.delete(hers.id, carol),
    ]);
    assert.deepEqual(await liveSessionContainers(), []);
  });
});

describe('expiry removes the container within 5 s of the expiry instant', () => {
  test('TTL, after a PATCH extended it: live past the first TTL, Expired at the new one', async (t) => {
    const { service, auditPath } = await serviceFor('ttl');
    const alice = principal('alice');
    const created = await service.sessions.create({ template: 'bash', ttlSeconds: 3 }, alice);
    const container = await containerOf(created.id);
    const extended = await service.sessions.extend(created.id, alice, { ttlSeconds: 7 });
    const expiry = Date.parse(extended.expiresAt);
    assert.equal(expiry - Date.parse(created.createdAt), 7000, 'the new lifetime counts from creation');
    await sleepUntil(Date.parse(created.expiresAt) + 1500);
    const r = await service.sessions.exec(created.id, alice, { command: ['echo', 'alive'] }).result;
    assert.equal(r.stdout, 'alive\n', 'past its first TTL the session works');
    const gone = await goneAt(container, expiry - Date.now() + REMOVED_WITHIN_MS + 5000);
    assert.ok(gone !== undefined, 'the container was removed');
    assert.ok(gone >= expiry - 50, `not before its TTL: ${gone - expiry} ms`);
    assert.ok(gone - expiry <= REMOVED_WITHIN_MS, `removed ${gone - expiry} ms after its TTL`);
    t.diagnostic(`the container was gone ${gone - expiry} ms after the TTL`);
    const ended = await service.sessions.get(created.id, alice);
    assert.deepEqual([ended.state, ended.reason], ['Expired', 'TTLExpired']);
    const events = await sessionEvents(auditPath, created.id, 2);
    assert.deepEqual(
      events.map((e) => [e.event, e.outcome.reason]),
      [
        ['session.created', 'Created'],
        ['session.expired', 'TTLExpired'],
      ],
    );
  });

  test('idle timeout: counted from the last exec, Expired', async (t) => {
    const { service, auditPath } = await serviceFor('idle');
    const alice = principal('alice');
    const created = await service.sessions.create({ template: 'bash', idleTimeoutSeconds: 3 }, alice);
    const container = await containerOf(created.id);
    await sleepUntil(Date.parse(created.createdAt) + 2000);
    const r = await service.sessions.exec(created.id, alice, { command: ['sleep', '2'] }).result;
    assert.equal(r.exitCode, 0, 'a running exec is not idleness');
    const view: Session = await service.sessions.get(created.id, alice);
    assert.equal(view.state, 'Ready', 'activity put the idle deadline off');
    const expiry = Date.parse(view.idleExpiresAt);
    assert.ok(expiry >= Date.parse(r.finishedAt!) + 3000 - 50, 'idle counts from the exec’s end');
    const gone = await goneAt(container, expiry - Date.now() + REMOVED_WITHIN_MS + 5000);
    assert.ok(gone !== undefined, 'the container was removed');
    assert.ok(gone >= expiry - 50, `not before its idle deadline: ${gone - expiry} ms`);
    assert.ok(gone - expiry <= REMOVED_WITHIN_MS, `removed ${gone - expiry} ms after its idle deadline`);
    t.diagnostic(`the container was gone ${gone - expiry} ms after the idle deadline`);
    const ended = await service.sessions.get(created.id, alice);
    assert.deepEqual([ended.state, ended.reason], ['Expired', 'IdleExpired']);
    const events = await sessionEvents(auditPath, created.id, 2);
    assert.deepEqual(events.at(-1)?.outcome, { phase: 'Expired', reason: 'IdleExpired' });
  });
});

describe('a session whose container or runner is killed', () => {
  test('docker kill of its container: Failed (ContainerFailed), the container removed, audited', async () => {
    const { service, auditPath } = await serviceFor('killed');
    const alice = principal('alice');
    const created = await service.sessions.create({ template: 'bash' }, alice);
    const container = await containerOf(created.id);
    await docker.getContainer(container).kill();
    const killedAt = Date.now();
    const gone = await goneAt(container, REMOVED_WITHIN_MS + 5000);
    assert.ok(gone !== undefined && gone - killedAt <= REMOVED_WITHIN_MS, 'removed soon after');
    const ended = await service.sessions.get(created.id, alice);
    assert.deepEqual([ended.state, ended.reason], ['Failed', 'ContainerFailed'], ended.message);
    const events = await sessionEvents(auditPath, created.id, 2);
    assert.deepEqual(events.at(-1)?.outcome, { phase: 'Failed', reason: 'ContainerFailed' });
    const refused = await refusal(
      (async () => service.sessions.exec(created.id, alice, { command: ['true'] }).result)(),
    );
    assert.equal(refused.code, 'NOT_FOUND', refused.message);
  });

  test('a runner the OOM killer took (its tmpfs workspace filled past the memory limit): Failed (OOMKilled)', async () => {
    const policy = createPolicy({ ceilings: { workspaceBytes: 256 * MiB } });
    const { service, auditPath } = await serviceFor('oom', { policy });
    const alice = principal('alice');
    const created = await service.sessions.create(
      { template: 'bash', resources: { memory: '64Mi', ephemeralStorage: '256Mi' } },
      alice,
    );
    const container = await containerOf(created.id);
    // tmpfs pages are charged to the memory cgroup of whoever writes them: here the runner itself.
    function* upload(): Generator<Buffer> {
      for (let i = 0; i < 160; i++) yield Buffer.alloc(MiB, i);
    }
    const write = await refusal(
      service.sessions.writeFile(created.id, alice, { path: 'big', content: Readable.from(upload()) }),
    );
    assert.equal(write.code, 'BACKEND_ERROR', write.message);
    assert.ok(await goneAt(container, REMOVED_WITHIN_MS + 5000), 'the container was removed');
    const ended = await service.sessions.get(created.id, alice);
    assert.deepEqual([ended.state, ended.reason], ['Failed', 'OOMKilled'], ended.message);
    const events = await sessionEvents(auditPath, created.id, 2);
    assert.deepEqual(events.at(-1)?.outcome, { phase: 'Failed', reason: 'OOMKilled' });
  });
});

function sleepUntil(at: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
}
