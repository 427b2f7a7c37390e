/**
 * `sandpit sessions` end to end: the built CLI against the built `sandpit serve` on the real engine.
 * create; cp up (a file, a directory with modes and binary bytes, stdin); exec streaming its output
 * while it runs, passing the exit code and stdin on, in the background, killed by Ctrl-C; cp down
 * (a file, a directory through the artifacts tar, stdout); logs; ls --json; rm; the address and
 * token from the config `sandpit serve` reads; shell through a real pseudo-terminal (@lydell/node-pty:
 * raw mode, the window size and a resize, Ctrl-C to the remote side, the exit code, the terminal
 * restored) and with stdin that is not a terminal; and the hostile cases: unknown ids, another
 * token's session, bad cp operands, a gateway that does not answer.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pty from '@lydell/node-pty';
import { requireDocker } from '../support/docker.js';
import {
  CLI,
  cleanEnv,
  ensureBuilt,
  freePort,
  startServe,
  tempDir,
  waitFor,
  type Served,
} from './helpers.js';

const TOKEN = 'sessions-cli-token-0123456';
const OTHER = 'sessions-cli-other-0123456';

let served: Served;
before(async () => {
  ensureBuilt();
  await requireDocker();
  served = await startServe({
    auth: { token: TOKEN, tokens: [{ name: 'other', token: OTHER }] },
    logging: { level: 'warn' },
    // An interactive shell is one exec: room for it on a slow machine (the default ceiling is 30 s).
    sandbox: { timeoutSeconds: 300 },
  });
});
after(() => served?.stop());

interface Ran {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

const gatewayEnv = (extra: Record<string, string> = {}) =>
  cleanEnv({ SANDPIT_URL: served.url, MCP_AUTH_TOKEN: TOKEN, ...extra });

/** `sandpit sessions ARGS` (the built CLI), with stdin given or closed. */
function sessions(
  args: string[],
  options: { cwd?: string; stdin?: string | Buffer; env?: Record<string, string> } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'sessions', ...args], {
      cwd: options.cwd,
      env: options.env ?? gatewayEnv(),
      stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => out.push(d));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr }));
    if (options.stdin !== undefined) child.stdin?.end(options.stdin);
  });
}

async function ok(args: string[], options: Parameters<typeof sessions>[1] = {}): Promise<string> {
  const r = await sessions(args, options);
  assert.equal(r.code, 0, `sandpit sessions ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.toString();
}

async function create(template = 'python'): Promise<string> {
  const id = (await ok(['create', '--template', template, '--ttl', '900', '--timeout', '300'])).trim();
  assert.match(id, /^ses-[0-9a-f]{16}$/);
  return id;
}

async function sessionOf(id: string): Promise<{ state: string; runningExecs: string[] }> {
  const res = await fetch(`${served.url}/sessions/${id}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  return (await res.json()) as { state: string; runningExecs: string[] };
}

const sha = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

describe('sandpit sessions (the built CLI, sandpit serve, real engine)', { timeout: 300_000 }, () => {
  test('create, cp up, exec, cp down (file, directory, stdout), logs, ls --json, rm', async () => {
    const dir = tempDir('sessions-cli');
    const id = await create();

    // Up: one file into the workspace, a directory with an executable and binary bytes, stdin.
    writeFileSync(
      join(dir, 'script.py'),
      [
        'import os, sys',
        'os.makedirs("results/deep", exist_ok=True)',
        'open("results/r1.txt", "w").write("one\\n")',
        'open("results/deep/r2.txt", "w").write("two\\n")',
        'open("out.json", "w").write(\'{"answer": 42}\')',
        'print("wrote results")',
        'sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)',
        '',
      ].join('\n'),
    );
    mkdirSync(join(dir, 'proj', 'sub'), { recursive: true });
    const binary = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256));
    writeFileSync(join(dir, 'proj', 'sub', 'b.bin'), binary);
    writeFileSync(join(dir, 'proj', 'run.sh'), '#!/bin/sh\necho ran "$@"\n');
    chmodSync(join(dir, 'proj', 'run.sh'), 0o755);
    await ok(['cp', 'script.py', `${id}:`], { cwd: dir });
    const upDir = await sessions(['cp', './proj', `${id}:proj`], { cwd: dir });
    assert.equal(upDir.code, 0, upDir.stderr);
    assert.match(upDir.stderr, /copied 2 files \(70\d{3} bytes\)/);
    await ok(['cp', '-', `${id}:notes/from-stdin.txt`], { stdin: 'piped in\n' });

    const inside = await ok([
      'exec',
      id,
      '--',
      'sh',
      '-c',
      'stat -c "%A %n" proj/run.sh; sha256sum proj/sub/b.bin; ./proj/run.sh x; cat notes/from-stdin.txt',
    ]);
    assert.equal(
      inside,
      `-rwxr-xr-x proj/run.sh\n${sha(binary)}  proj/sub/b.bin\nran x\npiped in\n`,
      'modes and bytes arrived as they were',
    );

    // Exec: the exit code comes back as this command's; stdin that is not a terminal goes in.
    const failed = await sessions(['exec', id, '--', 'python', 'script.py', '7']);
    assert.equal(failed.code, 7, failed.stderr);
    assert.equal(failed.stdout.toString(), 'wrote results\n');
    assert.equal(await ok(['exec', id, '--', 'tr', 'a-z', 'A-Z'], { stdin: 'shout\n' }), 'SHOUT\n');
    const shell = await sessions(['exec', id, '--shell', 'echo to-err >&2; exit 3']);
    assert.deepEqual([shell.code, shell.stderr], [3, 'to-err\n']);

    // Down: a file into a directory that exists, a directory (new, then into one that exists), stdout.
    await ok(['exec', id, '--', 'touch', '-d', '@981173106', 'out.json', 'results/r1.txt']);
    const down = join(dir, 'down');
    mkdirSync(down);
    await ok(['cp', `${id}:out.json`, 'down'], { cwd: dir });
    assert.equal(readFileSync(join(down, 'out.json'), 'utf8'), '{"answer": 42}');
    await ok(['cp', `${id}:results`, 'res'], { cwd: dir });
    assert.equal(readFileSync(join(dir, 'res', 'r1.txt'), 'utf8'), 'one\n');
    assert.equal(readFileSync(join(dir, 'res', 'deep', 'r2.txt'), 'utf8'), 'two\n');
    for (const copied of [join(down, 'out.json'), join(dir, 'res', 'r1.txt')])
      assert.equal(statSync(copied).mtimeMs, 981173106_000, `${copied} keeps its modification time`);
    await ok(['cp', `${id}:results`, 'down'], { cwd: dir });
    assert.equal(readFileSync(join(down, 'results', 'deep', 'r2.txt'), 'utf8'), 'two\n');
    await ok(['cp', `${id}:proj/.`, 'proj-copy'], { cwd: dir });
    assert.equal(sha(readFileSync(join(dir, 'proj-copy', 'sub', 'b.bin'))), sha(binary));
    assert.equal(statSync(join(dir, 'proj-copy', 'run.sh')).mode & 0o777, 0o755, 'the mode came back too');
    const toStdout = await sessions(['cp', `${id}:proj/sub/b.bin`, '-']);
    assert.equal(toStdout.code, 0, toStdout.stderr);
    assert.equal(sha(toStdout.stdout), sha(binary), 'bytes to stdout, unchanged');

    // Logs: every exec, in order, with how it ended; --json is the gateway's answer.
    const logs = await sessions(['logs', id]);
    assert.equal(logs.code, 0, logs.stderr);
    const headings = logs.stdout
      .toString()
      .split('\n')
      .filter((l) => l.startsWith('== '));
    assert.equal(headings.length, 5, logs.stdout.toString());
    assert.match(
      headings[1] ?? '',
      /^== exec-[0-9a-f]{12} {2}\$ python script\.py 7 {2}exit 7 \(Failed\/Error\) {2}\d+ms/,
    );
    assert.match(logs.stderr, /to-err/);
    const asJson = JSON.parse(await ok(['logs', id, '--json'])) as { execs: { argv: string[] }[] };
    assert.deepEqual(asJson.execs[2]?.argv, ['tr', 'a-z', 'A-Z']);

    // ls --json lists it, Ready; rm ends it; then it runs nothing more.
    const listed = JSON.parse(await ok(['ls', '--json'])) as { sessions: { id: string; state: string }[] };
    assert.equal(listed.sessions.find((s) => s.id === id)?.state, 'Ready');
    assert.equal(await ok(['rm', id]), `${id}\n`);
    const gone = JSON.parse(await ok(['ls', '--json'])) as { sessions: { id: string; state: string }[] };
    assert.equal(gone.sessions.find((s) => s.id === id)?.state, 'Deleted');
    const late = await sessions(['exec', id, '--', 'true']);
    assert.notEqual(late.code, 0);
    assert.match(late.stderr, /^sandpit: /);
  });

  test('exec streams its output while it runs; --background returns at once; Ctrl-C kills a foreground exec', async () => {
    const id = await create('bash');

    // The first line is on stdout while the command still runs (it waits for a file this test writes).
    const child = spawn(
      process.execPath,
      [
        CLI,
        'sessions',
        'exec',
        id,
        '--shell',
        'echo first; while [ ! -e go ]; do sleep 0.1; done; echo second; exit 4',
      ],
      {
        env: gatewayEnv(),
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    await waitFor('the first line', () => (out.includes('first\n') ? true : undefined), 60_000);
    assert.equal(child.exitCode, null, 'still running when its first line arrived');
    assert.equal(out, 'first\n');
    await ok(['exec', id, '--', 'touch', 'go']);
    assert.equal(await exited, 4);
    assert.equal(out, 'first\nsecond\n');

    // In the background: its id at once, its output later.
    const execId = (await ok(['exec', id, '--background', '--', 'sh', '-c', 'sleep 1; echo bg-done'])).trim();
    assert.match(execId, /^exec-[0-9a-f]{12}$/);
    const finished = await waitFor(
      'the background exec to finish',
      async () => {
        const r = JSON.parse(await ok(['logs', id, execId, '--json'])) as { phase: string; stdout: string };
        return r.phase === 'Running' ? undefined : r;
      },
      60_000,
    );
    assert.deepEqual([finished.phase, finished.stdout], ['Succeeded', 'bg-done\n']);

    // Ctrl-C: this command exits 130 and the exec it started is killed.
    const sleeper = spawn(process.execPath, [CLI, 'sessions', 'exec', id, '--', 'sleep', '600'], {
      env: gatewayEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let sleeperErr = '';
    sleeper.stderr.on('data', (d: Buffer) => (sleeperErr += d.toString()));
    const sleeperExit = new Promise<number | null>((resolve) => sleeper.on('close', resolve));
    await waitFor('the exec to run', async () =>
      (await sessionOf(id)).runningExecs.length ? true : undefined,
    );
    sleeper.kill('SIGINT');
    assert.equal(await sleeperExit, 130);
    assert.match(sleeperErr, /cancelled: the exec was killed/);
    await waitFor('the exec to be killed', async () =>
      (await sessionOf(id)).runningExecs.length ? undefined : true,
    );
    await ok(['rm', id]);
  });

  test('shell through a real pseudo-terminal: raw mode, the size and a resize, Ctrl-C remote, the exit code, the terminal restored', async () => {
    const id = await create('bash');
    // The CLI runs under a shell in the pty, so that the terminal's modes can be read after it exits.
    const term = pty.spawn(
      '/bin/sh',
      ['-c', `"${process.execPath}" "${CLI}" sessions shell ${id}; echo "CLI-EXIT=$?"; stty -a`],
      { cols: 100, rows: 30, env: gatewayEnv({ TERM: 'xterm' }) },
    );
    let out = '';
    term.onData((d) => (out += d));
    const exited = new Promise<void>((resolve) => term.onExit(() => resolve()));
    const waitOut = (pattern: RegExp) =>
      waitFor(`${pattern} in the terminal`, () => (pattern.test(out) ? true : undefined), 60_000).catch(
        (e: Error) => assert.fail(`${e.message}; it shows ${JSON.stringify(out.slice(-800))}`),
      );
    try {
      await waitOut(/\$ $/m);
      term.write('tty; stty size\r');
      await waitOut(/\/dev\/pts\/\d+\r*\n30 100\r*\n/);
      term.resize(120, 40);
      // SIGWINCH reaches the CLI, which sends the new size before the next keystrokes.
      await new Promise((r) => setTimeout(r, 500));
      term.write('stty size\r');
      await waitOut(/40 120\r*\n/);
      term.write('sleep 600\r');
      await new Promise((r) => setTimeout(r, 500));
      term.write('\x03'); // raw mode: Ctrl-C is a byte for the remote terminal, not a signal here
      term.write('echo after-interrupt\r');
      await waitOut(/\nafter-interrupt\r*\n/);
      term.write('exit 7\r');
      await waitOut(/CLI-EXIT=7/);
      await exited;
    } finally {
      term.kill();
    }
    // The user's terminal is cooked again (Node resets its stdio at exit as well, so this holds
    // the CLI to the outcome, not to its own restore).
    const modes = out.slice(out.indexOf('CLI-EXIT=7'));
    for (const mode of ['icanon', 'echo', 'isig'])
      assert.match(modes, new RegExp(`(^|\\s)${mode}(\\s|;|$)`, 'm'), `${mode} is back on after the shell`);
    assert.deepEqual((await sessionOf(id)).runningExecs, []);
    await ok(['rm', id]);
  });

  test('shell with stdin that is not a terminal: streamed in, its end ends it; --tty asks for a remote pty anyway', async () => {
    const id = await create('bash');
    const plain = await sessions(['shell', id, '--', 'sh'], { stdin: 'echo from-pipe; exit 4\n' });
    assert.equal(plain.code, 4, plain.stderr);
    assert.equal(plain.stdout.toString(), 'from-pipe\n');
    const eof = await sessions(['shell', id, '--', 'cat'], { stdin: 'all of it\n' });
    assert.deepEqual([eof.code, eof.stdout.toString()], [0, 'all of it\n']);
    const tty = await sessions(['shell', id, '--tty', '--json', '--', 'sh', '-c', 'tty; exit 5']);
    assert.equal(tty.code, 5, tty.stderr);
    assert.match(tty.stdout.toString(), /^\/dev\/pts\/\d+\r\n/);
    assert.equal(
      (JSON.parse(tty.stdout.toString().replace(/^[^{]*/, '')) as { exitCode: number }).exitCode,
      5,
    );
    await ok(['rm', id]);
  });

  test('the address and the token come from the config `sandpit serve` reads', async () => {
    const dir = tempDir('sessions-cli-config');
    const config = join(dir, 'config.json');
    writeFileSync(
      config,
      JSON.stringify({ server: { port: Number(new URL(served.url).port) }, auth: { token: TOKEN } }),
    );
    const r = await sessions(['ls', '--config', config], { env: cleanEnv() });
    assert.equal(r.code, 0, r.stderr);
  });

  test('hostile: unknown ids, another token’s session, bad cp operands, a gateway that does not answer', async () => {
    const dir = tempDir('sessions-cli-hostile');
    writeFileSync(join(dir, 'f.txt'), 'x');
    for (const args of [
      ['exec', 'ses-0000000000000000', '--', 'true'],
      ['logs', 'ses-0000000000000000'],
      ['rm', 'ses-0000000000000000'],
      ['shell', 'ses-0000000000000000'],
      ['cp', 'f.txt', 'ses-0000000000000000:f.txt'],
      ['cp', 'ses-0000000000000000:f.txt', '.'],
    ]) {
      const r = await sessions(args, { cwd: dir, stdin: '' });
      assert.equal(r.code, 66, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^sandpit: no session ses-0000000000000000\nhint: /, args.join(' '));
    }

    const id = await create();
    const foreign = await sessions(['exec', id, '--', 'true'], {
      env: gatewayEnv({ MCP_AUTH_TOKEN: OTHER }),
    });
    assert.equal(foreign.code, 66, "another token's session is not found");

    const bad: [string[], RegExp][] = [
      [['cp', `${id}:../../etc/passwd`, '.'], /invalid session path "..\/..\/etc\/passwd"/],
      [['cp', 'f.txt', `${id}:/etc/cron.d/x`], /invalid session path "\/etc\/cron.d\/x"/],
      [['cp', 'f.txt', 'other.txt'], /one of SRC and DEST is ID:PATH/],
      [['cp', `${id}:a`, `${id}:b`], /one of SRC and DEST is ID:PATH/],
      [['cp', 'f.txt'], /cp takes SRC and DEST/],
      [['cp', 'no such file', `${id}:`], /no local file or directory no such file/],
    ];
    for (const [args, message] of bad) {
      const r = await sessions(args, { cwd: dir });
      assert.ok(r.code === 64 || r.code === 66, `${args.join(' ')}: ${r.code} ${r.stderr}`);
      assert.match(r.stderr, message);
    }
    const missing = await sessions(['cp', `${id}:nothing-here`, '.'], { cwd: dir });
    assert.equal(missing.code, 66, missing.stderr);
    assert.match(missing.stderr, /no file or directory nothing-here in session/);
    assert.deepEqual(
      (await ok(['exec', id, '--', 'ls', '-A'])).split('\n').filter(Boolean),
      [],
      'nothing was written by the refused copies',
    );

    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const down = await sessions(['ls'], { env: gatewayEnv({ SANDPIT_URL: nowhere }) });
    assert.equal(down.code, 69);
    assert.match(
      down.stderr,
      new RegExp(`cannot reach the sandpit gateway at ${nowhere} \\(ECONNREFUSED\\)\\nhint: .*sandpit serve`),
    );
    assert.ok(!down.stderr.includes(TOKEN), 'the token is never printed');
    await ok(['rm', id]);
  });
});
