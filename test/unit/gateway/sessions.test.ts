/**
 * The session use cases over an in-memory session backend: what the gateway itself decides (caps,
 * ownership, expiry, the exec log, audit records, path and size checks). The real sandboxes are
 * the docker tier's (test/integration/docker/sessions*.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AuditRecord } from '../../../src/api/audit.js';
import { classify } from '../../../src/api/outcome.js';
import type { FileEntry, SessionReason } from '../../../src/api/session.js';
import type {
  ExecExecution,
  SandboxEnd,
  SessionBackend,
  SessionSandbox,
} from '../../../src/backends/sessions.js';
import type { SandboxBackend } from '../../../src/backends/types.js';
import type { Principal } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import type { SessionCaps } from '../../../src/gateway/sessions.js';
import type { AuditTrail } from '../../../src/observability/audit-trail.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy, type PolicyOptions } from '../../../src/policy/policy.js';
import { AppError, type ErrorCode } from '../../../src/shared/errors.js';
import { pollUntil } from '../../../src/shared/time.js';

const WAIT = { intervalMs: 50, timeoutMs: 10_000 };
const ALICE: Principal = { id: 'token:a11ce0000000000a', name: 'alice', scope: {} };
const BOB: Principal = { id: 'token:b0b0000000000000b', name: 'bob', scope: {} };

/** A sandbox that keeps files in a map and answers an exec with its argv on stdout. */
class MemorySandbox implements SessionSandbox {
  readonly files = new Map<string, Buffer>();
  closedWith: SessionReason | undefined;
  ttl: number | undefined;
  private endSandbox!: (end: SandboxEnd) => void;
  readonly ended = new Promise<SandboxEnd>((r) => (this.endSandbox = r));

  readonly sessionId: string;

  constructor(sessionId: string) {
    this.sessionId = sessionId;
  }

  exec(
    exec: Parameters<SessionSandbox['exec']>[0],
    options: Parameters<SessionSandbox['exec']>[1],
  ): ExecExecution {
    const text = `${exec.argv.join(' ')}\n`;
    let kill!: () => void;
    const killed = new Promise<void>((r) => (kill = r));
    const startedAt = Date.now();
    const run = exec.argv.includes('sleep') ? killed : Promise.resolve();
    const result = run.then(() => {
      options.onOutput({ stream: 'stdout', data: Buffer.from(text) });
      return {
        outcome: classify({ exitCode: 0, timedOut: false, oomKilled: false, cancelled: false }),
        stdout: { text, bytes: Buffer.byteLength(text), truncated: false, binary: false },
        stderr: { text: '', bytes: 0, truncated: false, binary: false },
        startedAt,
        finishedAt: Date.now(),
      };
    });
    return { execId: options.execId, result, writeStdin: async () => {}, endStdin() {}, resize() {}, kill };
  }

  private entry(path: string): FileEntry {
    const data = this.files.get(path);
    if (!data) throw new AppError('NOT_FOUND', `no file ${path}`);
    return { path, type: 'file', size: data.length, mode: '0644', mtime: new Date(0).toISOString() };
  }

  async writeFile(write: Parameters<SessionSandbox['writeFile']>[0]): Promise<FileEntry> {
    const chunks: Buffer[] = [];
    if (Buffer.isBuffer(write.data)) chunks.push(write.data);
    else for await (const c of write.data) chunks.push(c);
    this.files.set(write.path, Buffer.concat(chunks));
    return this.entry(write.path);
  }
  async readFile(read: { path: string; maxBytes: number }) {
    const data = this.files.get(read.path) ?? Buffer.alloc(0);
    return {
      entry: this.entry(read.path),
      data: (async function* () {
        yield data.subarray(0, read.maxBytes);
      })(),
    };
  }
  async list() {
    return [...this.files.keys()].map((p) => this.entry(p));
  }
  async remove(remove: { path: string }) {
    this.files.delete(remove.path);
  }
  async mkdir(mkdir: { path: string }): Promise<FileEntry> {
    return { path: mkdir.path, type: 'directory', size: 0, mode: '0755', mtime: new Date(0).toISOString() };
  }
  async watch() {
    return () => {};
  }
  async processes() {
    return [];
  }
  async *artifacts() {
    yield Buffer.from('tar');
  }
  async setTtl(ttlSeconds: number) {
    this.ttl = ttlSeconds;
  }
  async close(reason: SessionReason) {
    this.closedWith ??= reason;
  }
  /** The container dies by itself. */
  die(end: SandboxEnd) {
    this.endSandbox(end);
  }
}

function setup(options: { caps?: Partial<SessionCaps>; policy?: PolicyOptions; sessions?: boolean } = {}) {
  const sandboxes: MemorySandbox[] = [];
  const sessions: SessionBackend = {
    async createSession(_spec, { sessionId }) {
      const s = new MemorySandbox(sessionId);
      sandboxes.push(s);
      await new Promise((r) => setImmediate(r));
      return s;
    },
    async adoptSessions() {
      return { adopted: [], lost: [] };
    },
  };
  const backend: SandboxBackend = {
    name: 'docker',
    start: () => {
      throw new Error('no runs here');
    },
    health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'test' }),
    close: () => Promise.resolve(),
    ...(options.sessions === false ? {} : { sessions }),
  };
  const records: AuditRecord[] = [];
  const audit: AuditTrail = {
    assertAvailable() {},
    record: (r: AuditRecord) => void records.push(r),
    open: async () => {},
    flush: async () => {},
    close: async () => {},
    file: undefined,
  } as unknown as AuditTrail;
  const service = new SandpitService({
    backend,
    policy: createPolicy(options.policy),
    logger: silentLogger(),
    metrics: createMetrics(),
    audit,
    slots: { maxConcurrent: 4, maxQueued: 0 },
    sessions: options.caps,
  });
  return { service, sandboxes, records };
}

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
    const { service, records } = setup();
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
    const { service } = setup();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    await assert.rejects(service.sessions.get(s.id, BOB), code('NOT_FOUND'));
    assert.throws(() => service.sessions.exec(s.id, BOB, { command: ['ls'] }), code('NOT_FOUND'));
    await assert.rejects(service.sessions.readFile(s.id, BOB, { path: 'a' }), code('NOT_FOUND'));
    await assert.rejects(service.sessions.delete(s.id, BOB), code('NOT_FOUND'));
    assert.deepEqual(service.sessions.list(BOB), []);
    assert.equal((await service.sessions.get(s.id, ALICE)).state, 'Ready');
  });

  test('20 concurrent creates hold the global cap exactly; a token is held to its maxSessions', async () => {
    const { service } = setup({ caps: { max: 16, maxPerPrincipal: 100 } });
    const settled = await Promise.allSettled(
      Array.from({ length: 20 }, () => service.sessions.create({ template: 'python' }, ALICE)),
    );
    assert.equal(settled.filter((r) => r.status === 'fulfilled').length, 16);
    for (const r of settled.filter((x) => x.status === 'rejected')) {
      code('BUSY')(r.reason);
      assert.match((r.reason as AppError).message, /16 live sessions, the server's limit/);
    }
    const small = setup({ caps: { max: 16, maxPerPrincipal: 16 } });
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
    const { service, records } = setup({ caps: { logExecs: 3 } });
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
      service.sessions.logs(s.id, ALICE).map((e) => e.result.stdout),
      ['echo 2\n', 'echo 3\n', 'echo 4\n'],
    );
    assert.equal((await service.sessions.get(s.id, ALICE)).execs, 5);
    assert.equal(records.filter((r) => r.event === 'exec').length, 5);
  });

  test('a background exec returns at once, is Running until killed, then its result is kept', async () => {
    const { service } = setup();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    const handle = service.sessions.exec(s.id, ALICE, { command: ['sleep', '60'], background: true });
    assert.equal(service.sessions.execResult(s.id, handle.execId, ALICE).phase, 'Running');
    assert.deepEqual((await service.sessions.get(s.id, ALICE)).runningExecs, [handle.execId]);
    await service.sessions.killExec(s.id, handle.execId, ALICE);
    assert.equal(service.sessions.execResult(s.id, handle.execId, ALICE).phase, 'Succeeded');
  });

  test('concurrent execs past the session limit are BUSY', async () => {
    const { service } = setup({ policy: { sessions: { maxExecs: 2 } } });
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    service.sessions.exec(s.id, ALICE, { command: ['sleep', '1'], background: true });
    service.sessions.exec(s.id, ALICE, { command: ['sleep', '1'], background: true });
    assert.throws(() => service.sessions.exec(s.id, ALICE, { command: ['ls'] }), code('BUSY'));
  });

  test('the TTL ends the session Expired (TTLExpired), removes the sandbox, and is audited', async () => {
    const { service, sandboxes, records } = setup();
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
    const { service } = setup();
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

  test('a sandbox that dies by itself ends the session Failed with its reason', async () => {
    const { service, sandboxes, records } = setup();
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    sandboxes[0]?.die({ reason: 'OOMKilled', message: 'the runner was killed' });
    assert.ok(
      await pollUntil(async () => (await service.sessions.get(s.id, ALICE)).state === 'Failed', WAIT),
    );
    assert.equal((await service.sessions.get(s.id, ALICE)).reason, 'OOMKilled');
    assert.ok(records.some((r) => r.event === 'session.failed'));
  });

  test('paths that leave the workspace are INVALID_REQUEST naming the field, before the sandbox is asked', async () => {
    const { service, sandboxes } = setup();
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

  test('a file over the download limit is TOO_LARGE; an upload over the workspace too', async () => {
    const { service } = setup({ policy: { ceilings: { downloadBytes: 4, workspaceBytes: 1024 } } });
    const s = await service.sessions.create({ template: 'python' }, ALICE);
    await service.sessions.writeFile(s.id, ALICE, { path: 'big', content: Buffer.from('12345') });
    await assert.rejects(service.sessions.readFile(s.id, ALICE, { path: 'big' }), code('TOO_LARGE', 'path'));
    await assert.rejects(
      service.sessions.writeFile(s.id, ALICE, { path: 'huge', content: Buffer.alloc(2048) }),
      code('TOO_LARGE', 'content'),
    );
  });

  test('extending past the ceiling is POLICY_DENIED; within it the sandbox is told', async () => {
    const { service, sandboxes } = setup();
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
    const { service, sandboxes } = setup();
    const a = await service.sessions.create({ template: 'python' }, ALICE);
    await service.sessions.create({ template: 'python' }, ALICE);
    assert.equal((await service.sessions.delete(a.id, ALICE)).state, 'Deleted');
    assert.deepEqual(
      service.sessions
        .list(ALICE)
        .map((x) => x.state)
        .sort(),
      ['Deleted', 'Ready'],
    );
    await service.shutdown({ endSessions: true });
    assert.deepEqual(
      sandboxes.map((x) => x.closedWith),
      ['Deleted', 'Deleted'],
    );
  });

  test('a backend without sessions says so (UNSUPPORTED)', async () => {
    const { service } = setup({ sessions: false });
    await assert.rejects(service.sessions.create({ template: 'python' }, ALICE), code('UNSUPPORTED'));
  });

  test('a bad request names its fields and creates nothing', async () => {
    const { service, sandboxes } = setup();
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
