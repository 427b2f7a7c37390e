/**
 * The session contract: the same session requests through the gateway's service give the same
 * results on every backend (issue 15: "a platform team changes sandbox.backend and nothing else").
 * Registered by docker.test.ts and kubernetes.test.ts with their targets. The allowed
 * differences: how precisely an idle session is expired (the target's idlePrecisionMs: on
 * Kubernetes the operator expires it from the session Lease's renewTime, which the gateway writes
 * at most every 10 s), and the record a session that ended by itself leaves (waitSessionGone's
 * `kept`: on Kubernetes its Sandbox, with the operator's phase and reason).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, describe } from 'node:test';
import { extract } from 'tar-stream';
import type { ExecRequestInput, ExecResult, Session, SessionRequestInput } from '../../src/api/session.js';
import { AppError } from '../../src/shared/errors.js';
import { failureMarkingTest } from '../integration/kubernetes/operator-harness.js';
import { OUTPUT_BYTES, PRINCIPAL, type ContractTarget } from './target.js';

const sha = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

async function readAll(data: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of data) parts.push(c);
  return Buffer.concat(parts);
}

/** A rejection's AppError code and the fields it names. */
async function refusal(p: Promise<unknown> | (() => unknown)): Promise<{ code: string; fields: string[] }> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    assert.ok(e instanceof AppError, `an AppError, not ${String(e)}`);
    return { code: e.code, fields: e.violations.map((v) => v.field) };
  }
  assert.fail('expected a refusal');
}

async function untar(stream: AsyncIterable<Buffer>): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const extractor = extract();
  const reading = (async () => {
    for await (const entry of extractor) {
      const data = await readAll(entry as AsyncIterable<Buffer>);
      out.set(entry.header.name, entry.header.type === 'file' ? data.toString() : `<${entry.header.type}>`);
    }
  })();
  for await (const chunk of stream) extractor.write(chunk);
  extractor.end(undefined);
  await reading;
  return out;
}

async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export function sessionContractCases(target: () => ContractTarget, onFailure: () => void = () => {}): void {
  const it = failureMarkingTest(240_000, onFailure);
  const sessions = () => target().service.sessions;
  const open: string[] = [];

  const create = async (request: SessionRequestInput = { template: 'python' }): Promise<Session> => {
    const s = await sessions().create(request, PRINCIPAL);
    open.push(s.id);
    return s;
  };
  const exec = (id: string, request: ExecRequestInput): Promise<ExecResult> =>
    sessions().exec(id, PRINCIPAL, request).result;
  const write = (id: string, path: string, text: string | Buffer) =>
    sessions().writeFile(id, PRINCIPAL, { path, content: Buffer.from(text) });
  const read = async (id: string, path: string): Promise<string> =>
    (await readAll((await sessions().readFile(id, PRINCIPAL, { path })).data)).toString();
  const remove = async (id: string) => {
    await sessions().delete(id, PRINCIPAL);
    await target().waitSessionGone(id, 60_000);
  };

  // The expiry case mostly waits (an idle timeout is at least 60 s on Kubernetes): it runs beside
  // the others, two cases at a time.
  describe('sessions', { concurrency: 2 }, () => {
    it('sessions: TTL, an extended TTL and idle expiry end the session, remove its sandbox and leave the record of the end', async () => {
      const x = target();
      const ttl = await create({ template: 'bash', ttlSeconds: 10 });
      // The same 10 s lifetime, extended at once to 30 s (a new whole lifetime, counted from creation).
      const longer = await create({ template: 'bash', ttlSeconds: 10 });
      const extended = await sessions().extend(longer.id, PRINCIPAL, { ttlSeconds: 30 });
      assert.equal(extended.limits.ttlSeconds, 30);
      assert.equal(Date.parse(extended.expiresAt) - Date.parse(extended.createdAt), 30_000);
      const idle = await create({ template: 'bash', idleTimeoutSeconds: 60, ttlSeconds: 600 });
      const idleFrom = Date.now();
      await exec(idle.id, { command: ['true'] });
      const lastActivity = Date.now();
      const ended = async (id: string) => {
        const s = await sessions().get(id, PRINCIPAL);
        return s.state !== 'Ready' ? s : undefined;
      };
      let ttlEnd: Session | undefined;
      await until(
        async () => (ttlEnd = await ended(ttl.id)) !== undefined,
        10_000 + 30_000,
        'the TTL ends it',
      );
      assert.deepEqual([ttlEnd?.state, ttlEnd?.reason], ['Expired', 'TTLExpired']);
      await x.waitSessionGone(ttl.id, 60_000, { phase: 'Expired', reason: 'TTLExpired' });
      // Past its old expiry the extended session lives and works; it ends TTLExpired at the new one.
      const createdAt = Date.parse(longer.createdAt);
      await new Promise((r) => setTimeout(r, Math.max(0, createdAt + 12_000 - Date.now())));
      const alive = await exec(longer.id, { command: ['echo', 'still here'] });
      assert.equal(alive.stdout, 'still here\n', JSON.stringify(alive));
      assert.equal((await sessions().get(longer.id, PRINCIPAL)).state, 'Ready');
      let longerEnd: Session | undefined;
      await until(
        async () => (longerEnd = await ended(longer.id)) !== undefined,
        createdAt + 30_000 + 30_000 - Date.now(),
        'the extended TTL ends it',
      );
      const longerEndedAt = Date.now();
      assert.deepEqual([longerEnd?.state, longerEnd?.reason], ['Expired', 'TTLExpired']);
      assert.ok(
        longerEndedAt - createdAt >= 30_000 - 1000,
        `ended ${longerEndedAt - createdAt} ms after creation`,
      );
      await x.waitSessionGone(longer.id, 60_000, { phase: 'Expired', reason: 'TTLExpired' });
      let idleEnd: Session | undefined;
      await until(
        async () => (idleEnd = await ended(idle.id)) !== undefined,
        60_000 + x.idlePrecisionMs + 30_000,
        'idleness ends it',
      );
      const endedAt = Date.now();
      assert.deepEqual([idleEnd?.state, idleEnd?.reason], ['Expired', 'IdleExpired']);
      // Not before its idle time (counted from the last exec), and within the backend's precision.
      assert.ok(endedAt - lastActivity >= 60_000 - 1000, `ended ${endedAt - lastActivity} ms after activity`);
      assert.ok(
        endedAt - idleFrom <= 60_000 + x.idlePrecisionMs + 5000,
        `ended ${endedAt - idleFrom} ms after creation; precision ${x.idlePrecisionMs} ms`,
      );
      await x.waitSessionGone(idle.id, 60_000, { phase: 'Expired', reason: 'IdleExpired' });
    });

    it('sessions: three commands share files, env and the workspace', async () => {
      const s = await create({
        template: 'python',
        env: [{ name: 'GREETING', value: 'hello' }],
        secrets: [{ name: 'TOKEN', value: 's3cret' }],
      });
      assert.equal(s.state, 'Ready');
      assert.equal(s.backend, target().name);
      const a = await exec(s.id, { shell: 'echo "$GREETING" > note.txt; mkdir -p data; echo 41 > data/n' });
      assert.equal(a.phase, 'Succeeded', JSON.stringify(a));
      await write(s.id, 'step.py', 'print(int(open("data/n").read()) + 1)\n');
      const b = await exec(s.id, { command: ['python3', 'step.py'] });
      assert.equal(b.stdout, '42\n');
      const c = await exec(s.id, { shell: 'cat note.txt; echo "$TOKEN"; pwd; id -u; echo err >&2; exit 3' });
      assert.equal(c.stdout, 'hello\ns3cret\n/workspace\n1000\n');
      assert.equal(c.stderr, 'err\n', 'stdout and stderr apart on every backend');
      assert.deepEqual([c.phase, c.reason, c.exitCode], ['Failed', 'Error', 3]);
      assert.equal(await read(s.id, 'note.txt'), 'hello\n');
      await remove(s.id);
    });

    it('sessions: execs run at once, and a background exec reports later', async () => {
      const s = await create();
      const t0 = performance.now();
      const runs = await Promise.all([1, 2, 3].map((i) => exec(s.id, { shell: `sleep 2; echo ${i}` })));
      const wall = performance.now() - t0;
      assert.deepEqual(
        runs.map((r) => r.stdout),
        ['1\n', '2\n', '3\n'],
      );
      assert.ok(wall < 5800, `3 × 2 s took ${wall.toFixed(0)} ms: they did not run at once`);
      const bg = sessions().exec(s.id, PRINCIPAL, {
        shell: 'echo started; sleep 1; echo finished',
        background: true,
      });
      const running = await sessions().execResult(s.id, bg.execId, PRINCIPAL);
      assert.equal(running.phase, 'Running');
      const done = await bg.result;
      assert.equal(done.stdout, 'started\nfinished\n');
      assert.equal((await sessions().execResult(s.id, bg.execId, PRINCIPAL)).phase, 'Succeeded');
      await remove(s.id);
    });

    it('sessions: the deadline, OOM and output caps, and the session lives on', async () => {
      const s = await create({ template: 'python', resources: { memory: '128Mi' } });
      const slow = await exec(s.id, { shell: 'echo before; sleep 30', timeoutSeconds: 2 });
      assert.deepEqual([slow.phase, slow.reason, slow.timedOut], ['TimedOut', 'DeadlineExceeded', true]);
      assert.equal(slow.stdout, 'before\n');
      const oom = await exec(s.id, { command: ['python3', '-c', 'b = bytearray(1024 * 1024 * 1024)'] });
      assert.equal(oom.reason, 'OOMKilled', JSON.stringify(oom));
      const big = await exec(s.id, {
        command: ['python3', '-c', 'import sys; sys.stdout.write("a" * 50000 + "END")'],
      });
      assert.equal(big.truncated, true);
      assert.equal(big.stdoutBytes, 50003);
      assert.ok(big.stdout.length <= OUTPUT_BYTES + 200, `capped: ${big.stdout.length}`);
      assert.ok(big.stdout.startsWith('aaaa') && big.stdout.endsWith('END'), 'head and tail kept');
      const next = await exec(s.id, { command: ['echo', 'alive'] });
      assert.equal(next.stdout, 'alive\n');
      await remove(s.id);
    });

    it('sessions: a tty exec runs on a terminal whose size follows resize, its input echoed', async () => {
      const s = await create({ template: 'bash' });
      let seen = '';
      const handle = sessions().exec(
        s.id,
        PRINCIPAL,
        { shell: 'tty; stty size; read -r line; stty size; echo "got $line"', tty: true },
        { streamStdin: true, terminal: { cols: 100, rows: 30 }, onOutput: (c) => (seen += c.text) },
      );
      await until(() => Promise.resolve(/30 100/.test(seen)), 20_000, `the first size (${seen})`);
      handle.execution.resize(120, 40);
      await handle.execution.writeStdin(Buffer.from('hello\n'));
      const r = await handle.result;
      assert.equal(r.exitCode, 0, JSON.stringify(r));
      const lines = r.stdout.split('\r\n');
      assert.match(lines[0]!, /^\/dev\/pts\/\d+$/, 'stdin is a terminal');
      assert.deepEqual(lines.slice(1), ['30 100', 'hello', '40 120', 'got hello', ''], r.stdout);
      assert.equal(r.stderr, '', 'a terminal has one output stream');
      await remove(s.id);
    });

    it('sessions: a watch reports the changes execs make, under a directory or to one file, until stopped', async () => {
      const s = await create({ template: 'bash' });
      await exec(s.id, { shell: 'mkdir -p data && echo 1 > data/one && echo a > notes.txt' });
      const inDir: string[] = [];
      const onFile: string[] = [];
      const stopDir = await sessions().watch(s.id, PRINCIPAL, 'data', (c) =>
        inDir.push(`${c.kind} ${c.path}`),
      );
      const stopFile = await sessions().watch(s.id, PRINCIPAL, 'notes.txt', (c) =>
        onFile.push(`${c.kind} ${c.path}`),
      );
      await exec(s.id, { shell: 'echo 2 > data/two; echo b >> notes.txt; rm data/one' });
      await until(
        () =>
          Promise.resolve(
            inDir.includes('changed data/two') &&
              inDir.includes('removed data/one') &&
              onFile.includes('changed notes.txt'),
          ),
        20_000,
        `the changes reported (${JSON.stringify({ inDir, onFile })})`,
      );
      assert.ok(
        inDir.every((e) => / data\//.test(e)),
        `only paths under the watched directory: ${inDir.join(', ')}`,
      );
      stopDir();
      stopFile();
      const before = inDir.length + onFile.length;
      await exec(s.id, { shell: 'echo 3 > data/three; echo c >> notes.txt' });
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(inDir.length + onFile.length, before, 'nothing after the watches stopped');
      await remove(s.id);
    });

    it('sessions: paths stay in the workspace', async () => {
      const s = await create({ template: 'bash' });
      for (const path of ['../etc/passwd', '/etc/passwd', 'a/../../x', 'a\0b']) {
        const r = await refusal(write(s.id, path, 'x'));
        assert.deepEqual([r.code, r.fields], ['INVALID_REQUEST', ['path']], path);
        const rr = await refusal(read(s.id, path));
        assert.equal(rr.code, 'INVALID_REQUEST', path);
      }
      await exec(s.id, { shell: 'ln -s /etc out; ln -s /etc/passwd pw; mkdir -p d' });
      for (const path of ['out/passwd', 'pw']) {
        const r = await refusal(read(s.id, path));
        assert.ok(['INVALID_REQUEST', 'NOT_FOUND'].includes(r.code), `${path}: ${r.code}`);
        await assert.rejects(write(s.id, path, 'owned'), path);
      }
      const check = await exec(s.id, { shell: 'cat /etc/passwd | grep -c owned || true' });
      assert.equal(check.stdout, '0\n', 'nothing was written through a link');
      await remove(s.id);
    });

    it('sessions: artifacts come back as a tar of what the execs wrote', async () => {
      const s = await create();
      await exec(s.id, {
        command: [
          'python3',
          '-c',
          'import os; os.makedirs("out", exist_ok=True); open("out/r.txt","w").write("result 7")',
        ],
      });
      await write(s.id, 'out/in.bin', Buffer.from([0, 1, 2, 255]));
      const tar = await untar(sessions().artifacts(s.id, PRINCIPAL, 'out'));
      assert.equal(tar.get('out/r.txt'), 'result 7');
      assert.equal(sha(tar.get('out/in.bin') ?? ''), sha(Buffer.from([0, 1, 2, 255]).toString()));
      await remove(s.id);
    });

    it('sessions: a new session starts clean', async () => {
      const first = await create({ template: 'bash', env: [{ name: 'FIRST', value: 'yes' }] });
      await exec(first.id, {
        shell:
          'echo left > /workspace/left; echo left > /tmp/left; setsid sleep 300 < /dev/null > /dev/null 2>&1 &',
      });
      await remove(first.id);
      const second = await create({ template: 'bash' });
      const r = await exec(second.id, {
        shell:
          'find /workspace /tmp -mindepth 1; echo "find $?"; env | grep -c FIRST || true; cat /proc/[0-9]*/cmdline | tr "\\0" " " | grep -c "[s]leep 300" || true',
      });
      assert.equal(r.stdout, 'find 0\n0\n0\n');
      const other = await refusal(sessions().get(second.id, { ...PRINCIPAL, id: 'someone-else' }));
      assert.equal(other.code, 'NOT_FOUND', 'another principal cannot see it');
      await remove(second.id);
    });

    // Every session a case made is gone (a failed case may leave its own; ended ones are checked
    // too), one that ended by itself with the record of how.
    after(async () => {
      const kept = new Map<string, { phase: string; reason: string }>();
      for (const id of open) {
        const s = await sessions()
          .get(id, PRINCIPAL)
          .catch(() => undefined);
        if (s?.state === 'Ready') await sessions().delete(id, PRINCIPAL);
        else if (s?.reason && s.reason !== 'Deleted') kept.set(id, { phase: s.state, reason: s.reason });
      }
      for (const id of open) await target().waitSessionGone(id, 60_000, kept.get(id));
    });
  });
}
