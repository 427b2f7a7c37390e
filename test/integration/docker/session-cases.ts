/**
 * The properties every session keeps, whatever the runtime (runc, runsc): one suite run once per
 * runtime, through the backend's session port on the real engine. Each test fails if its property
 * broke.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { extract } from 'tar-stream';
import { after, before, describe, test } from 'node:test';
import type { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import type { SessionSandbox } from '../../../src/backends/sessions.js';
import type { EffectiveSessionSpec } from '../../../src/policy/session.js';
import { AppError } from '../../../src/shared/errors.js';
import { makeBackend, POOLS_ON } from '../../support/docker.js';
import {
  eventually,
  execSpec,
  MiB,
  readAll,
  runExec,
  sessionContainers,
  sessionId,
  sessionPolicy,
  sessionSpec,
} from '../../support/sessions.js';

/** A rejection's AppError: its code and the fields its violations name. */
async function refusal(p: Promise<unknown>): Promise<{ code: string; fields: string[]; message: string }> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof AppError, `an AppError, not ${String(e)}`);
    return { code: e.code, fields: e.violations.map((v) => v.field), message: e.message };
  }
  assert.fail('expected a refusal');
}

interface TarEntry {
  name: string;
  type: string;
  mode: number;
  data: string;
}

/** The entries of a tar stream, read with tar-stream, sorted by name. */
async function untar(stream: AsyncIterable<Buffer>): Promise<TarEntry[]> {
  const out: TarEntry[] = [];
  const extractor = extract();
  const reading = (async () => {
    for await (const entry of extractor) {
      const data = await readAll(entry as AsyncIterable<Buffer>);
      out.push({
        name: entry.header.name,
        type: entry.header.type ?? '?',
        mode: entry.header.mode ?? 0,
        data: data.toString(),
      });
    }
  })();
  for await (const chunk of stream) extractor.write(chunk);
  extractor.end(undefined);
  await reading;
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** Whether a SIGKILL waits for the host process `pid` (/proc's SigPnd and ShdPnd masks). */
function killPending(pid: number): boolean {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return [...status.matchAll(/^(?:SigPnd|ShdPnd):\s*([0-9a-f]+)$/gm)].some(
    ([, mask]) => (BigInt(`0x${mask}`) & 0x100n) !== 0n,
  );
}

/**
 * Freezes the host process `pid` in a cgroup v1 freezer of its own (the machine's cgroups are
 * hybrid), so a signal sent to it waits; the returned thaw lets it act, and removes the cgroup.
 */
async function freezeOnHost(pid: number): Promise<() => Promise<void>> {
  const dir = `/sys/fs/cgroup/freezer/sandpit-test-${pid}`;
  await mkdir(dir);
  await writeFile(`${dir}/cgroup.procs`, String(pid));
  await writeFile(`${dir}/freezer.state`, 'FROZEN');
  assert.ok(
    await eventually(async () => (await readFile(`${dir}/freezer.state`, 'utf8')).trim() === 'FROZEN', 5_000),
    `${dir} froze`,
  );
  return async () => {
    await writeFile(`${dir}/freezer.state`, 'THAWED');
    await eventually(async () => (await readFile(`${dir}/cgroup.procs`, 'utf8')).trim() === '', 10_000);
    await rmdir(dir);
  };
}

export function sessionCases(runtime?: 'runsc'): void {
  describe(`sessions (${runtime ?? 'default runtime'})`, () => {
    let backend: DockerBackend;
    const policy = sessionPolicy(runtime ? { defaultRuntime: runtime, allowedRuntimes: [runtime] } : {});
    const open: SessionSandbox[] = [];
    const create = async (
      request: Parameters<typeof sessionSpec>[0] = { template: 'python' },
      p = policy,
    ): Promise<{ sandbox: SessionSandbox; spec: EffectiveSessionSpec; id: string }> => {
      const spec = sessionSpec(request, p);
      const id = sessionId();
      const sandbox = await backend.sessions.createSession(spec, { sessionId: id, principal: 'tester' });
      open.push(sandbox);
      return { sandbox, spec, id };
    };
    before(async () => {
      backend = await makeBackend();
    });
    after(async () => {
      await Promise.all(open.map((s) => s.close('Deleted')));
      await backend.close();
    });

    test('three commands share files, env and the workspace; each reports its exit code', async () => {
      const { sandbox, spec } = await create({
        template: 'python',
        env: [{ name: 'GREETING', value: 'hello' }],
        secrets: [{ name: 'TOKEN', value: 's3cret' }],
      });
      const a = await runExec(sandbox, spec, {
        shell: 'echo "$GREETING" > note.txt; mkdir -p data; echo 41 > data/n',
      });
      assert.equal(a.outcome.phase, 'Succeeded');
      await sandbox.writeFile({
        path: 'step.py',
        data: Buffer.from('print(int(open("data/n").read()) + 1)\n'),
      });
      const b = await runExec(sandbox, spec, { command: ['python3', 'step.py'] });
      assert.equal(b.stdout.text, '42\n');
      const c = await runExec(sandbox, spec, { shell: 'cat note.txt; echo "$TOKEN"; pwd; id -u; exit 3' });
      assert.equal(c.stdout.text, 'hello\ns3cret\n/workspace\n1000\n');
      assert.equal(c.outcome.phase, 'Failed');
      assert.equal(c.outcome.exitCode, 3);
      const read = await sandbox.readFile({ path: 'note.txt', maxBytes: MiB });
      assert.equal((await readAll(read.data)).toString(), 'hello\n');
      assert.equal(read.entry.size, 6);
    });

    test('execs run at once, and a background exec reports later', async () => {
      const { sandbox, spec } = await create();
      const t0 = performance.now();
      const runs = await Promise.all(
        [1, 2, 3, 4].map((i) => runExec(sandbox, spec, { shell: `sleep 1.5; echo ${i}` })),
      );
      const wall = performance.now() - t0;
      assert.deepEqual(
        runs.map((r) => r.stdout.text),
        ['1\n', '2\n', '3\n', '4\n'],
      );
      assert.ok(wall < 4 * 1500, `4 × 1.5 s took ${wall.toFixed(0)} ms: they did not run at once`);
      const chunks: string[] = [];
      const bg = sandbox.exec(
        execSpec({ shell: 'echo started; sleep 1; echo finished', background: true }, spec, policy),
        { execId: 'bg1', onOutput: (c) => chunks.push(c.data.toString()) },
      );
      assert.ok(await eventually(() => chunks.join('').includes('started'), 10_000), 'its output streams');
      const quick = await runExec(sandbox, spec, { command: ['echo', 'meanwhile'] });
      assert.equal(quick.stdout.text, 'meanwhile\n');
      const r = await bg.result;
      assert.equal(r.stdout.text, 'started\nfinished\n');
      assert.equal(r.outcome.phase, 'Succeeded');
      const killed = sandbox.exec(execSpec({ command: ['sleep', '30'], background: true }, spec, policy), {
        execId: 'bg2',
        onOutput: () => {},
      });
      setTimeout(() => killed.kill(), 300);
      const k = await killed.result;
      assert.equal(k.outcome.phase, 'Cancelled');
    });

    test("a deadline kills the exec's process group and nothing else; escapees live on, listed", async () => {
      const { sandbox, spec } = await create();
      const t0 = performance.now();
      const r = await runExec(sandbox, spec, {
        shell: 'sleep 60 & sleep 61 & setsid sleep 62 < /dev/null > /dev/null 2>&1 & echo up; wait',
        timeoutSeconds: 2,
      });
      assert.equal(r.outcome.phase, 'TimedOut');
      assert.equal(r.outcome.reason, 'DeadlineExceeded');
      assert.equal(r.stdout.text, 'up\n');
      assert.ok(performance.now() - t0 < 10_000);
      const procs = await sandbox.processes();
      assert.ok(procs, 'a Docker session always lists its processes');
      const commands = procs.map((p) => p.command);
      assert.ok(
        commands.some((c) => c === 'sleep 62'),
        `the setsid escapee lives: ${JSON.stringify(commands)}`,
      );
      assert.ok(!commands.some((c) => c === 'sleep 60' || c === 'sleep 61'), 'the group is dead');
      const next = await runExec(sandbox, spec, { command: ['echo', 'still here'] });
      assert.equal(next.stdout.text, 'still here\n');
    });

    // The host's process table shows the container's processes under runc only.
    if (!runtime)
      test("a process whose SIGKILL from its exec's deadline has not landed yet is not listed (frozen on the host)", async () => {
        const { sandbox, spec, id } = await create();
        const exec = runExec(sandbox, spec, { shell: 'sleep 60 & echo up; wait', timeoutSeconds: 4 });
        let pid: number | undefined;
        const found = await eventually(async () => {
          // A pooled session's container takes its name after the claim, without waiting.
          const [info] = await sessionContainers(backend.docker, id);
          if (!info) return false;
          const top = (await backend.docker.getContainer(info.Id).top({ ps_args: '-o pid,args' })) as {
            Processes?: string[][];
          };
          pid = top.Processes?.find(([, args]) => args === 'sleep 60')?.map(Number)[0];
          return pid !== undefined;
        }, 3_000);
        assert.ok(found && pid, "the exec's sleep 60 shows on the host within 3 s, before the deadline");
        const thaw = await freezeOnHost(pid);
        try {
          const r = await exec;
          assert.equal(r.outcome.phase, 'TimedOut', 'the deadline came while the host held sleep 60 frozen');
          assert.ok(killPending(pid), 'sleep 60 is still there, its SIGKILL waiting: the case under test');
          const commands = (await sandbox.processes())?.map((p) => p.command);
          assert.ok(
            commands && !commands.includes('sleep 60'),
            `listed as alive: ${JSON.stringify(commands)}`,
          );
        } finally {
          await thaw();
        }
      });

    test('output is capped like a run’s: head and tail, exact counts, binary detected', async () => {
      const { sandbox, spec } = await create({ template: 'python', resources: {} });
      const outputBytes = spec.limits.outputBytes;
      const r = await runExec(sandbox, spec, {
        command: [
          'python3',
          '-c',
          `import sys; sys.stdout.write("a" * ${outputBytes} + "b" * ${outputBytes}); sys.stderr.write("e" * 10)`,
        ],
      });
      assert.equal(r.stdout.bytes, 2 * outputBytes);
      assert.equal(r.stdout.truncated, true);
      assert.ok(r.stdout.text.startsWith('a'.repeat(outputBytes / 2)));
      assert.ok(r.stdout.text.endsWith('b'.repeat(outputBytes / 2)));
      assert.match(r.stdout.text, /\[… \d+ bytes truncated …\]/);
      assert.equal(r.stderr.text, 'eeeeeeeeee');
      const streamed = r.chunks.filter((c) => c.stream === 'stdout').reduce((n, c) => n + c.data.length, 0);
      assert.equal(streamed, outputBytes / 2, 'only the head streams live');
      const bin = await runExec(sandbox, spec, { command: ['head', '-c', '4096', '/dev/urandom'] });
      assert.equal(bin.stdout.binary, true);
      assert.equal(bin.stdout.bytes, 4096);
      assert.match(bin.stdout.text, /binary output: 4096 bytes/);
    });

    test('paths stay in the workspace: .., absolute, symlinks that leave, FIFOs, devices, NUL and overlong names are refused, naming the field', async () => {
      const { sandbox, spec } = await create({ template: 'bash' });
      const made = await runExec(sandbox, spec, {
        shell: [
          'ln -s /etc/passwd passwd-link',
          'ln -s / root-link',
          'ln -s ../../etc up-link',
          'ln -s /dev/zero zero-link',
          'ln -s /tmp tmp-link',
          'mkdir -p inside/dir && echo ok > inside/dir/f && ln -s inside/dir in-link && ln -s /workspace/inside abs-in',
          'mkfifo fifo',
        ].join(' && '),
      });
      assert.equal(made.outcome.phase, 'Succeeded', made.stderr.text);
      const read = (path: string) => sandbox.readFile({ path, maxBytes: MiB }).then((r) => readAll(r.data));
      for (const path of [
        'passwd-link',
        'root-link/etc/passwd',
        'up-link/passwd',
        'zero-link',
        'tmp-link/x',
        '../etc/passwd',
        '/etc/passwd',
        'fifo',
        'a\0b',
        `${'n'.repeat(256)}`,
        `${'d/'.repeat(2100)}f`,
      ]) {
        const r = await refusal(read(path));
        assert.ok(['INVALID_REQUEST', 'NOT_FOUND'].includes(r.code), `${path}: ${r.code} ${r.message}`);
        assert.deepEqual(r.fields, ['path'], `${JSON.stringify(path.slice(0, 20))} names the field`);
      }
      for (const path of ['passwd-link', 'root-link/tmp/x', 'tmp-link/planted', 'fifo', 'up-link/x']) {
        const r = await refusal(sandbox.writeFile({ path, data: Buffer.from('planted') }));
        assert.deepEqual(r.fields, ['path'], `${path}: ${r.message}`);
      }
      const tmp = await runExec(sandbox, spec, {
        // find, not ls: Debian's runsc (20221219) answers statx with EINVAL.
        shell: 'find /tmp -mindepth 1; echo "exit $?"',
      });
      assert.equal(tmp.stdout.text, 'exit 0\n', 'nothing was planted outside the workspace');
      for (const path of ['root-link', 'tmp-link', 'up-link']) {
        const r = await refusal(sandbox.list({ path, recursive: true }));
        assert.deepEqual(r.fields, ['path'], `${path}: ${r.message}`);
      }
      // Symlinks that stay inside are followed; a listing shows links as links, never their targets.
      assert.equal((await read('in-link/f')).toString(), 'ok\n');
      assert.equal((await read('abs-in/dir/f')).toString(), 'ok\n');
      const listed = await sandbox.list({ path: '', recursive: true });
      const types = Object.fromEntries(listed.map((e) => [e.path, e.type]));
      assert.equal(types['passwd-link'], 'symlink');
      assert.equal(types['root-link'], 'symlink');
      assert.equal(types.fifo, 'other');
      assert.ok(!listed.some((e) => e.path.startsWith('root-link/')), 'a listing never follows a link');
      const cwd = await refusal(
        Promise.resolve().then(() => runExec(sandbox, spec, { command: ['pwd'], cwd: 'root-link' })),
      );
      assert.deepEqual(cwd.fields, ['cwd']);
      const rm = await refusal(sandbox.remove({ path: '', recursive: true }));
      assert.deepEqual(rm.fields, ['path']);
      await sandbox.remove({ path: 'root-link', recursive: false });
      const still = await runExec(sandbox, spec, { shell: 'test -d /etc && echo etc-intact' });
      assert.equal(still.stdout.text, 'etc-intact\n', 'removing a link removes the link');
    });

    test('a huge sparse file is refused for download; 50 MB streams up and back whole', async () => {
      const big = sessionPolicy({
        ...(runtime ? { defaultRuntime: runtime, allowedRuntimes: [runtime] } : {}),
        ceilings: { workspaceBytes: 256 * MiB, downloadBytes: 64 * MiB },
      });
      const { sandbox, spec } = await create(
        { template: 'bash', resources: { ephemeralStorage: '256Mi' } },
        big,
      );
      const sparse = await runExec(
        sandbox,
        spec,
        { shell: `truncate -s ${spec.limits.fileSizeBytes} sparse && du -k sparse` },
        { policy: big },
      );
      assert.equal(sparse.outcome.phase, 'Succeeded', sparse.stderr.text);
      const r = await refusal(sandbox.readFile({ path: 'sparse', maxBytes: big.ceilings.downloadBytes }));
      assert.equal(r.code, 'TOO_LARGE');
      assert.deepEqual(r.fields, ['path']);
      assert.match(r.message, /256 ?MiB|268435456/);
      const size = 50 * 1000 * 1000;
      const hash = createHash('sha256');
      function* upload(): Generator<Buffer> {
        for (let sent = 0; sent < size; sent += 1_000_000) {
          const chunk = Buffer.alloc(1_000_000, sent / 1_000_000);
          hash.update(chunk);
          yield chunk;
        }
      }
      const entry = await sandbox.writeFile({ path: 'up/fifty', data: Readable.from(upload()) });
      assert.equal(entry.size, size);
      const inside = await runExec(
        sandbox,
        spec,
        { shell: 'sha256sum up/fifty | cut -c1-64' },
        { policy: big },
      );
      const digest = hash.digest('hex');
      assert.equal(inside.stdout.text.trim(), digest);
      const back = await sandbox.readFile({ path: 'up/fifty', maxBytes: big.ceilings.downloadBytes });
      assert.equal(
        createHash('sha256')
          .update(await readAll(back.data))
          .digest('hex'),
        digest,
      );
    });

    test('an upload that cannot fit is refused before a byte is written, and leaves nothing', async () => {
      const { sandbox, spec } = await create({ template: 'bash' });
      const r = await refusal(
        sandbox.writeFile({ path: 'huge', data: Buffer.alloc(spec.limits.workspaceBytes + MiB) }),
      );
      assert.equal(r.code, 'TOO_LARGE');
      function* stream(): Generator<Buffer> {
        for (let i = 0; i < spec.limits.workspaceBytes / MiB + 4; i++) yield Buffer.alloc(MiB, 1);
      }
      const s = await refusal(sandbox.writeFile({ path: 'streamed', data: Readable.from(stream()) }));
      assert.equal(s.code, 'TOO_LARGE');
      assert.deepEqual(await sandbox.list({ path: '', recursive: true }), [], 'no partial file');
    });

    test('the per-session cap counts what is there already: a write past it is refused and leaves nothing', async () => {
      const { sandbox, spec } = await create({ template: 'bash', resources: { ephemeralStorage: '32Mi' } });
      const cap = spec.limits.workspaceBytes;
      const first = await sandbox.writeFile({ path: 'first', data: Buffer.alloc(Math.floor(cap * 0.6), 7) });
      assert.equal(first.size, Math.floor(cap * 0.6));
      const whole = await refusal(
        sandbox.writeFile({ path: 'second', data: Buffer.alloc(Math.floor(cap * 0.6), 8) }),
      );
      assert.equal(whole.code, 'TOO_LARGE', whole.message);
      function* stream(): Generator<Buffer> {
        for (let i = 0; i < (cap * 0.6) / MiB; i++) yield Buffer.alloc(MiB, 9);
      }
      const streamed = await refusal(sandbox.writeFile({ path: 'third', data: Readable.from(stream()) }));
      assert.equal(streamed.code, 'TOO_LARGE', streamed.message);
      const left = await sandbox.list({ path: '', recursive: true });
      assert.deepEqual(
        left.map((e) => [e.path, e.size]),
        [['first', first.size]],
        'no partial file, and the first one whole',
      );
      const r = await runExec(sandbox, spec, { command: ['ls', '-A'] });
      assert.equal(r.stdout.text, 'first\n', 'nothing else in the workspace, hidden part files included');
    });

    test('streamed stdin reaches the program as it is written, and its end ends it', async () => {
      const { sandbox, spec } = await create({ template: 'bash' });
      const execution = sandbox.exec(execSpec({ shell: 'sha256sum | cut -c1-64; echo done' }, spec, policy), {
        execId: 'streamed',
        onOutput: () => {},
        streamStdin: true,
      });
      const hash = createHash('sha256');
      // Past the runner's stdin window (1 MiB), so that its credit has to come back.
      for (let i = 0; i < 12; i++) {
        const piece = Buffer.alloc(256 * 1024, i);
        hash.update(piece);
        await execution.writeStdin(piece);
      }
      const early = await Promise.race([
        execution.result.then(() => 'ended'),
        new Promise((r) => setTimeout(() => r('waiting'), 500)),
      ]);
      assert.equal(early, 'waiting', 'the program waits for more until stdin ends');
      execution.endStdin();
      const r = await execution.result;
      assert.equal(r.outcome.exitCode, 0, r.stderr.text);
      assert.equal(r.stdout.text, `${hash.digest('hex')}\ndone\n`);
    });

    test('a tty exec runs on a terminal whose size follows resize(), its input echoed', async () => {
      const { sandbox, spec } = await create({ template: 'bash' });
      let seen = '';
      const execution = sandbox.exec(
        execSpec(
          { shell: 'tty; stty size; read -r line; stty size; echo "got $line"', tty: true },
          spec,
          policy,
        ),
        {
          execId: 'tty',
          onOutput: (c) => (seen += c.data.toString()),
          streamStdin: true,
          terminal: { cols: 100, rows: 30 },
        },
      );
      assert.ok(await eventually(() => /30 100/.test(seen), 10_000), `the first size: ${seen}`);
      execution.resize(120, 40);
      await execution.writeStdin(Buffer.from('hello\n'));
      const r = await execution.result;
      assert.equal(r.outcome.exitCode, 0, r.stdout.text);
      const lines = r.stdout.text.split('\r\n');
      assert.match(lines[0]!, /^\/dev\/pts\/\d+$/, 'stdin is a terminal');
      assert.deepEqual(lines.slice(1), ['30 100', 'hello', '40 120', 'got hello', ''], r.stdout.text);
      assert.equal(r.stderr.bytes, 0, 'a terminal has one output stream');
    });

    test('a watch reports the changes execs make, under a directory or to one file, until stopped', async () => {
      const { sandbox, spec } = await create({ template: 'bash' });
      await runExec(sandbox, spec, { shell: 'mkdir -p data && echo 1 > data/one && echo a > notes.txt' });
      const inDir: string[] = [];
      const onFile: string[] = [];
      const stopDir = await sandbox.watch('data', (c) => inDir.push(`${c.kind} ${c.path}`));
      const stopFile = await sandbox.watch('notes.txt', (c) => onFile.push(`${c.kind} ${c.path}`));
      await runExec(sandbox, spec, { shell: 'echo 2 > data/two; echo b >> notes.txt; rm data/one' });
      assert.ok(
        await eventually(
          () =>
            inDir.includes('changed data/two') &&
            inDir.includes('removed data/one') &&
            onFile.includes('changed notes.txt'),
          10_000,
        ),
        `events: ${JSON.stringify({ inDir, onFile })}`,
      );
      assert.ok(
        inDir.every((e) => / data\//.test(e)),
        `only paths under the watched directory: ${inDir.join(', ')}`,
      );
      stopDir();
      stopFile();
      const before = inDir.length + onFile.length;
      await runExec(sandbox, spec, { shell: 'echo 3 > data/three; echo c >> notes.txt' });
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(inDir.length + onFile.length, before, 'nothing after the watches stopped');
    });

    test('artifacts: one path or the whole workspace as a tar stream, capped before any byte', async () => {
      const { sandbox, spec } = await create({ template: 'bash' });
      const made = await runExec(sandbox, spec, {
        shell:
          'mkdir -p out/sub && printf one > out/a.txt && printf two > out/sub/b.bin && chmod 755 out/a.txt && ln -s /etc/passwd out/link && mkfifo out/fifo && printf top > top.txt',
      });
      assert.equal(made.outcome.phase, 'Succeeded', made.stderr.text);
      const entries = await untar(sandbox.artifacts({ path: 'out', maxBytes: MiB }));
      assert.deepEqual(
        entries.map((e) => [e.name, e.type, e.data]),
        [
          ['out/a.txt', 'file', 'one'],
          ['out/sub', 'directory', ''],
          ['out/sub/b.bin', 'file', 'two'],
        ].sort((a, b) => a[0]!.localeCompare(b[0]!)),
        'files and directories only: no link, no FIFO',
      );
      assert.equal(entries.find((e) => e.name === 'out/a.txt')?.mode, 0o755);
      const whole = await untar(sandbox.artifacts({ path: '', maxBytes: MiB }));
      assert.ok(whole.some((e) => e.name === 'top.txt' && e.data === 'top'));
      const r = await refusal(readAll(sandbox.artifacts({ path: '', maxBytes: 5 })));
      assert.equal(r.code, 'TOO_LARGE');
      assert.deepEqual(r.fields, ['path']);
      const escape = await refusal(readAll(sandbox.artifacts({ path: 'out/link', maxBytes: MiB })));
      assert.deepEqual(escape.fields, ['path']);
    });

    test("an exec attacking the runner's channel changes nothing: forged frames skipped, PID 1 unharmed", async () => {
      const { sandbox, spec } = await create();
      const attack = await runExec(sandbox, spec, {
        command: [
          'python3',
          '-c',
          [
            'import json, os, signal, struct, sys',
            'print("real", flush=True)',
            'try:',
            '    fd = os.open("/proc/1/fd/1", os.O_WRONLY)',
            'except OSError as e:',
            '    print("channel:", e.strerror, file=sys.stderr, flush=True)',
            'else:',
            '    rep = json.dumps({"exitCode": 0, "signal": 0, "timedOut": False, "oomKilled": False, "killed": False, "stdoutBytes": 6, "stderrBytes": 0, "durationMs": 1}).encode()',
            '    for kind, body in ((b"O", b"forged"), (b"X", rep)):',
            '        os.write(fd, bytes(16) + kind + b"\\0" + struct.pack(">IH", 1, len(body)) + body)',
            '    print("channel: written", file=sys.stderr, flush=True)',
            'try:',
            '    os.kill(1, signal.SIGKILL)',
            'except OSError as e:',
            '    print("kill:", e.strerror, file=sys.stderr, flush=True)',
            'print("after", flush=True)',
            'sys.exit(3)',
          ].join('\n'),
        ],
      });
      assert.doesNotMatch(attack.stdout.text, /forged/);
      if (runtime === 'runsc') {
        // PID 1 of the exec's own namespace is its init: the exec ended itself, and only itself.
        // (The namespace dies with its init a moment later: some of "after" may get out first.)
        assert.equal(attack.outcome.exitCode, 137, attack.stderr.text);
        assert.match(attack.stdout.text, /^real\n(a(f(t(e(r\n?)?)?)?)?)?$/);
      } else {
        assert.equal(attack.outcome.exitCode, 3, attack.stderr.text);
        assert.equal(attack.stdout.text, 'real\nafter\n');
        assert.equal(attack.stderr.text, 'channel: Permission denied\n');
      }
      const next = await runExec(sandbox, spec, { command: ['echo', 'alive'] });
      assert.equal(next.stdout.text, 'alive\n', 'the session and its runner live on');
    });

    if (!runtime) {
      test('an exec over the memory limit is OOMKilled, and the session lives on', async () => {
        const { sandbox, spec } = await create({ template: 'python', resources: { memory: '128Mi' } });
        const r = await runExec(sandbox, spec, {
          command: ['python3', '-c', 'b = bytearray(1024 * 1024 * 1024)'],
        });
        assert.equal(r.outcome.reason, 'OOMKilled', JSON.stringify(r.outcome));
        const next = await runExec(sandbox, spec, { command: ['echo', 'alive'] });
        assert.equal(next.stdout.text, 'alive\n');
      });
    }

    test('a new session starts clean: no file, process or env of an earlier one', async () => {
      const first = await create({ template: 'bash', env: [{ name: 'FIRST', value: 'yes' }] });
      await runExec(first.sandbox, first.spec, {
        shell:
          'echo left > /workspace/left; echo left > /tmp/left; setsid sleep 300 < /dev/null > /dev/null 2>&1 &',
      });
      await first.sandbox.close('Deleted');
      assert.deepEqual(await sessionContainers(backend.docker, first.id), [], 'the closed session is gone');
      // The first took the pool's container: the second comes from the pool once it has refilled
      // (on two loaded cores that can take longer than closing the first).
      if (POOLS_ON && !runtime) assert.ok(await backend.pool?.filled(60_000), 'the pools refilled');
      const second = await create({ template: 'bash' });
      if (POOLS_ON && !runtime) {
        const [c] = await sessionContainers(backend.docker, second.id);
        assert.equal(c?.Labels['sandpit.dev/kind'], 'pool', 'the second session came from a session pool');
      }
      const r = await runExec(second.sandbox, second.spec, {
        shell:
          'find /workspace /tmp -mindepth 1; echo "find $?"; env | grep -c FIRST || true; cat /proc/[0-9]*/cmdline | tr "\\0" " " | grep -c "[s]leep 300" || true',
      });
      assert.equal(r.stdout.text, 'find 0\n0\n0\n', 'no file, env or process of the first session');
      assert.deepEqual(await second.sandbox.processes(), []);
    });
  });
}
