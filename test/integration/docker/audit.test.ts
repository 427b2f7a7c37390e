/**
 * The audit trail against the real engine: N runs through the service leave exactly N records with
 * the right fields; a full audit filesystem refuses runs (the service and `sandpit run`) until there
 * is room; a `sandpit serve` killed with SIGKILL loses at most its last batch, and `sandpit audit`
 * finds the records by run id and principal; 100 execs in a session leave exactly 100 exec records
 * with the right fields, found by `sandpit audit --session`.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type Docker from 'dockerode';
import type { AuditRecord, ExecAuditRecord, RunAuditRecord } from '../../../src/api/audit.js';
import type { ExecRequestInput, ExecResult } from '../../../src/api/session.js';
import type { RunResult } from '../../../src/api/run.js';
import { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import type { Principal } from '../../../src/gateway/principal.js';
import { AppError } from '../../../src/shared/errors.js';
import { pollUntil } from '../../../src/shared/time.js';
import { freePort } from '../../e2e/helpers.js';
import { readAuditFile } from '../../support/audit.js';
import { BUILT_CLI, ensureBuilt } from '../../support/built-cli.js';
import { requireDocker } from '../../support/docker.js';
import { dockerService } from '../../support/service.js';
import { fill, mountTmpfs, type Tmpfs } from '../../support/tmpfs.js';

const CLI = [BUILT_CLI];
const dir = mkdtempSync(join(tmpdir(), 'sandpit-audit-docker-'));
const mounts: Tmpfs[] = [];
let docker: Docker;

before(async () => {
  ensureBuilt();
  docker = await requireDocker();
});
after(() => {
  for (const m of mounts) m.unmount();
  rmSync(dir, { recursive: true, force: true });
});

const CI_BOT: Principal = { id: 'token:c1b0c1b0c1b0c1b0', name: 'ci-bot', scope: {} };

/** A service over its own backend (closed by its shutdown), writing the audit file at `path`. */
const serviceWith = (path: string) => dockerService({ docker, auditPath: path });

describe('runs through the service', () => {
  test('N real runs leave exactly N run records, each with the right fields', async () => {
    const path = join(dir, 'service', 'audit.jsonl');
    const { service, audit } = await serviceWith(path);
    await audit.open();
    const requests = [
      {
        template: 'python',
        code: 'import sys\nprint(sys.stdin.read().upper() + open("in.txt").read())',
        files: [{ path: 'in.txt', content: 'file-content-never-audited' }],
        stdin: 'from stdin',
        env: [{ name: 'API_KEY', value: 'sk-env-never-audited' }],
      },
      { template: 'bash', code: 'echo out; echo err >&2; exit 3' },
      { template: 'bash', code: 'sleep 10', timeoutSeconds: 1 },
      { image: 'sandpit/bash:5', command: ['sh', '-c', 'printf %s "$0"', 'argv text'] },
      { template: 'node', code: 'console.log(1 + 1)' },
      { template: 'python', code: 'print("x" * 5000)', resources: { memory: '128m', cpu: '0.5' } },
    ];
    const results = await Promise.all(requests.map((r) => service.runs.run(r, CI_BOT)));
    await service.shutdown();

    const records = readAuditFile(path) as RunAuditRecord[];
    assert.equal(records.length, requests.length, 'exactly one record per run');
    assert.deepEqual(records.map((r) => r.runId).sort(), results.map((r) => r.runId).sort());
    const text = JSON.stringify(records);
    for (const secret of ['file-content-never-audited', 'sk-env-never-audited', 'from stdin'])
      assert.ok(!text.includes(secret), `no ${secret} in the trail`);

    const byRun = new Map(records.map((r) => [r.runId, r]));
    results.forEach((res: RunResult, i) => {
      const r = byRun.get(res.runId)!;
      const request = requests[i]!;
      assert.equal(r.event, 'run');
      assert.equal(r.principal, 'ci-bot');
      assert.equal(r.backend, 'docker');
      assert.equal(r.template, res.template);
      assert.equal(r.image, res.image);
      assert.deepEqual(r.limits, res.limits);
      assert.equal(r.network, 'none');
      assert.equal(r.exitCode, res.exitCode);
      assert.equal(r.durationMs, res.durationMs);
      assert.equal(r.bytesOut, res.stdoutBytes + res.stderrBytes);
      assert.deepEqual(r.outcome, { phase: res.phase, reason: res.reason });
      assert.match(r.command.digest, /^sha256:[0-9a-f]{64}$/);
      assert.ok(Date.parse(r.time) >= Date.parse(res.createdAt!), 'stamped when the run ended');
      const input = ('code' in request ? request.code : '') ?? '';
      const files = 'files' in request ? request.files!.reduce((n, f) => n + f.content.length, 0) : 0;
      const stdin = 'stdin' in request ? request.stdin!.length : 0;
      assert.equal(r.bytesIn, Buffer.byteLength(input) + files + stdin, `bytes in of run ${i}`);
    });
    const [py, failed, timedOut, argv] = results.map((res) => byRun.get(res.runId)!);
    assert.equal(py!.command.preview, 'import sys ↵ print(sys.stdin.read().upper() + open("in.txt").read())');
    assert.deepEqual(failed!.outcome, { phase: 'Failed', reason: 'Error' });
    assert.equal(failed!.exitCode, 3);
    assert.deepEqual(timedOut!.outcome, { phase: 'TimedOut', reason: 'DeadlineExceeded' });
    assert.equal(argv!.command.preview, `sh -c 'printf %s "$0"' 'argv text'`);
    assert.equal(byRun.get(results[5]!.runId)!.limits.cpu, '500m');
    assert.equal(byRun.get(results[5]!.runId)!.bytesOut, 5001);
  });

  test('a full audit filesystem refuses runs while the engine is up; they run again once there is room', async () => {
    const fs = mountTmpfs(64);
    mounts.push(fs);
    const path = join(fs.dir, 'audit.jsonl');
    const filler = fill(fs.dir);
    const { service, audit, metrics, backend } = await serviceWith(path);
    await audit.open();
    const before = (await backend.health()).ok;
    assert.ok(before, 'the engine is up: only the audit file stands in the way');
    await assert.rejects(
      service.runs.run({ template: 'python', code: 'print(1)' }, CI_BOT),
      (e: unknown) =>
        e instanceof AppError &&
        e.code === 'AUDIT_UNAVAILABLE' &&
        e.message.includes(path) &&
        /free space there/.test(e.hint ?? ''),
    );
    assert.match(
      await metrics.registry.metrics(),
      /sandpit_rejected_requests_total\{code="AUDIT_UNAVAILABLE",component="gateway"\} 1/,
    );
    unlinkSync(filler);
    const open = await pollUntil(
      () => {
        try {
          audit.assertAvailable();
          return true;
        } catch {
          return false;
        }
      },
      { intervalMs: 20, timeoutMs: 5000 },
    );
    assert.ok(open, 'the gate opened once there was room');
    const res = await service.runs.run({ template: 'python', code: 'print(1)' }, CI_BOT);
    assert.equal(res.phase, 'Succeeded');
    await service.shutdown();
    assert.deepEqual(
      readAuditFile(path).map((r) => (r as RunAuditRecord).runId),
      [res.runId],
    );
  });
});

describe('session execs through the service', () => {
  /** Four kinds of exec, over and over: exits, per-exec deadlines, stdin and env, output sizes. */
  function execRequest(i: number): ExecRequestInput {
    switch (i % 4) {
      case 0:
        return { command: ['sh', '-c', `echo out-${i}; echo err-${i} >&2; exit ${i % 7}`] };
      case 1:
        return { shell: `head -c ${i * 10} /dev/zero`, timeoutSeconds: 5 };
      case 2:
        return { command: ['cat'], stdin: `stdin-${i}-never-audited` };
      default:
        return { command: ['printf', '%s', 'x'.repeat(i)], env: [{ name: 'K', value: 'env-never-audited' }] };
    }
  }

  test('100 execs leave exactly 100 exec records with the right fields; sandpit audit --session finds them', async () => {
    const path = join(dir, 'session', 'audit.jsonl');
    const { service, audit } = await serviceWith(path);
    await audit.open();
    const session = await service.sessions.create({ template: 'bash', timeoutSeconds: 30 }, CI_BOT);
    const results: ExecResult[] = [];
    for (let i = 0; i < 100; i += 10) {
      const batch = Array.from({ length: 10 }, (_, k) =>
        service.sessions.exec(session.id, CI_BOT, execRequest(i + k)),
      );
      results.push(...(await Promise.all(batch.map((h) => h.result))));
    }
    await service.sessions.delete(session.id, CI_BOT);
    await service.shutdown({ endSessions: true });

    const records = readAuditFile(path);
    const execs = records.filter((r): r is ExecAuditRecord => r.event === 'exec');
    assert.equal(execs.length, 100, 'exactly one record per exec');
    assert.deepEqual(execs.map((r) => r.execId).sort(), results.map((r) => r.execId).sort());
    const text = JSON.stringify(records);
    for (const secret of ['never-audited']) assert.ok(!text.includes(secret), `no ${secret} in the trail`);
    const byExec = new Map(execs.map((r) => [r.execId, r]));
    results.forEach((res, i) => {
      const r = byExec.get(res.execId)!;
      const request = execRequest(i);
      assert.equal(r.sessionId, session.id);
      assert.equal(r.principal, 'ci-bot');
      assert.equal(r.backend, 'docker');
      assert.equal(r.template, 'bash');
      assert.equal(r.image, session.image);
      assert.equal(r.network, 'none');
      assert.deepEqual(r.limits, res.limits, `limits of exec ${i}`);
      assert.equal(r.limits.timeoutSeconds, request.timeoutSeconds ?? 30, `the deadline of exec ${i}`);
      assert.equal(r.exitCode, res.exitCode);
      assert.equal(r.exitCode, i % 4 === 0 ? i % 7 : 0, `exit code of exec ${i}`);
      assert.equal(r.durationMs, res.durationMs);
      assert.equal(r.bytesIn, request.stdin?.length ?? 0, `bytes in of exec ${i}`);
      assert.equal(r.bytesOut, res.stdoutBytes + res.stderrBytes);
      assert.equal(r.bytesOut, [`out-${i}\nerr-${i}\n`.length, i * 10, request.stdin?.length, i][i % 4]);
      assert.deepEqual(r.outcome, { phase: res.phase, reason: res.reason });
      assert.match(r.command.digest, /^sha256:[0-9a-f]{64}$/);
      assert.ok(Date.parse(r.time) >= Date.parse(session.createdAt), 'stamped after the session began');
      assert.ok(Date.parse(r.time) <= Date.now());
    });
    assert.equal(new Set(execs.map((r) => r.command.digest)).size, 100, 'each command its own digest');
    const [first, second] = results.map((res) => byExec.get(res.execId)!);
    assert.equal(first!.command.preview, `sh -c 'echo out-0; echo err-0 >&2; exit 0'`);
    assert.equal(second!.command.preview, `/bin/sh -c 'head -c 10 /dev/zero'`);
    assert.deepEqual(first!.outcome, { phase: 'Succeeded', reason: 'Completed' });
    assert.deepEqual(byExec.get(results[4]!.execId)!.outcome, { phase: 'Failed', reason: 'Error' });
    assert.deepEqual(
      records
        .filter((r) => r.event.startsWith('session.') && 'sessionId' in r && r.sessionId === session.id)
        .map((r) => [r.event, 'outcome' in r ? r.outcome.reason : undefined]),
      [
        ['session.created', 'Created'],
        ['session.deleted', 'Deleted'],
      ],
    );

    const cli = (args: string[]) => {
      const r = spawnSync(process.execPath, [...CLI, 'audit', '--file', path, '--json', ...args], {
        encoding: 'utf8',
      });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as AuditRecord);
    };
    const found = cli(['--session', session.id]);
    assert.equal(found.length, 102, 'its 100 execs and its 2 events');
    assert.ok(found.every((r) => 'sessionId' in r && r.sessionId === session.id));
    const foundExecs = cli(['--session', session.id, '--event', 'exec']);
    assert.deepEqual(
      foundExecs.map((r) => (r as ExecAuditRecord).execId).sort(),
      results.map((r) => r.execId).sort(),
    );
    assert.deepEqual(cli(['--session', 'ses-none']), []);
  });
});

describe('sandpit run', () => {
  test('with a full audit filesystem it runs nothing: exit 74, naming the file and the fix', () => {
    const fs = mountTmpfs(64);
    mounts.push(fs);
    const path = join(fs.dir, 'audit.jsonl');
    fill(fs.dir);
    const r = spawnSync(process.execPath, [...CLI, 'run', '-c', 'print("ran")'], {
      env: { ...process.env, SANDPIT_AUDIT_FILE: path },
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 74, r.stderr);
    assert.equal(r.stdout, '', 'the program never ran');
    assert.match(r.stderr, new RegExp(`audit file ${path} cannot be written \\(ENOSPC\\)`));
    assert.match(r.stderr, /hint: .*free space there/);
  });
});

async function startServe(configPath: string): Promise<{ child: ChildProcess; url: string; logs: string[] }> {
  const port = await freePort();
  const child = spawn(process.execPath, [...CLI, 'serve', '--port', String(port), '--config', configPath], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  child.stdout.on('data', (d: Buffer) => logs.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => logs.push(d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const up = await pollUntil(
    async () => {
      if (child.exitCode !== null) return true;
      try {
        await (await fetch(`${url}/health`)).body?.cancel();
        return true;
      } catch {
        return false;
      }
    },
    { intervalMs: 100, timeoutMs: 60_000 },
  );
  assert.ok(up && child.exitCode === null, `sandpit serve answered:\n${logs.join('')}`);
  return { child, url, logs };
}

describe('a gateway killed with SIGKILL', () => {
  test('loses at most its last batch; sandpit audit finds the rest by run id and principal', async (t) => {
    const path = join(dir, 'killed', 'audit.jsonl');
    const token = 'audit-test-token-0123456789';
    const configPath = join(dir, 'killed.json');
    writeFileSync(
      configPath,
      JSON.stringify({
        auth: { tokens: [{ name: 'ci-bot', token }] },
        audit: { file: path, flushIntervalMs: 100 },
        pool: { minIdle: 2, prewarm: ['python'] },
        logging: { level: 'warn' },
      }),
    );
    const { child, url } = await startServe(configPath);
    const exited = new Promise((r) => child.once('exit', r));
    const client = new Client({ name: 'audit-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    const run = async (i: number): Promise<{ runId: string; at: number }> => {
      const r = await client.callTool(
        { name: 'run_code', arguments: { language: 'python', code: `print(${i})` } },
        undefined,
        { timeout: 120_000 },
      );
      const runId = (r.structuredContent as { runId?: string } | undefined)?.runId;
      assert.ok(runId, `run ${i} has an id: ${JSON.stringify(r.content)}`);
      return { runId, at: performance.now() };
    };
    try {
      const early: string[] = [];
      for (let i = 0; i < 5; i++) early.push((await run(i)).runId);
      // Longer than a batch window and its fsync: all five are in the file while the server lives.
      await new Promise((r) => setTimeout(r, 500));
      assert.deepEqual(
        readAuditFile(path).map((r) => (r as RunAuditRecord).runId),
        early,
      );
      const late: { runId: string; at: number }[] = [];
      for (let i = 5; i < 10; i++) late.push(await run(i));
      process.kill(child.pid!, 'SIGKILL');
      const killedAt = performance.now();
      await exited;

      const found = readAuditFile(path).map((r) => (r as RunAuditRecord).runId);
      assert.deepEqual(found.slice(0, 5), early, 'every record older than a batch survived');
      const kept = found.slice(5);
      assert.deepEqual(
        kept,
        late.slice(0, kept.length).map((l) => l.runId),
        'the survivors of the last runs, in order',
      );
      t.diagnostic(`after SIGKILL: ${kept.length} of the last ${late.length} records survived`);
      for (const lost of late.slice(kept.length)) {
        const age = killedAt - lost.at;
        assert.ok(
          age < 100 + 250,
          `only the last batch was lost: ${lost.runId} ended ${age.toFixed(0)} ms before the kill`,
        );
      }

      const audit = (args: string[]) =>
        spawnSync(process.execPath, [...CLI, 'audit', '--file', path, '--json', ...args], {
          encoding: 'utf8',
        });
      const one = audit(['--run', early[2]!]);
      assert.equal(one.status, 0, one.stderr);
      const lines = one.stdout.trim().split('\n');
      assert.equal(lines.length, 1);
      assert.equal((JSON.parse(lines[0]!) as RunAuditRecord).runId, early[2]);
      const mine = audit(['--principal', 'ci-bot']);
      assert.equal(mine.status, 0, mine.stderr);
      assert.equal(mine.stdout.trim().split('\n').length, found.length);
      const nobody = audit(['--principal', 'someone-else']);
      assert.equal(nobody.stdout, '');
    } finally {
      await client.close().catch(() => undefined);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      // The killed server's pool containers: its owner is dead, so the reaper takes them.
      await new DockerBackend({ docker }).reap();
    }
  });
});
