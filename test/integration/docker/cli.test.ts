/** `sandpit run` end to end against the real engine: streaming, inference, exit codes, errors. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { BUILT_CLI, ensureBuilt } from '../../support/built-cli.js';
import { requireDocker } from '../../support/docker.js';

const CLI = [BUILT_CLI];
const dir = mkdtempSync(join(tmpdir(), 'sandpit-cli-'));

function sandpit(args: string[], options: { input?: string; env?: Record<string, string> } = {}) {
  const r = spawnSync(process.execPath, [...CLI, ...args], {
    input: options.input ?? '',
    env: { ...process.env, ...options.env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

before(async () => {
  ensureBuilt();
  await requireDocker();
});

test('sandpit run --template python -c prints and exits 0', () => {
  const r = sandpit(['run', '--template', 'python', '-c', 'print(1)']);
  assert.equal(r.stdout, '1\n');
  assert.equal(r.code, 0, r.stderr);
});

test('sandpit run FILE infers the template from the extension, with files and stdin passed through', () => {
  const app = join(dir, 'app.js');
  writeFileSync(
    app,
    'const fs = require("fs"); process.stdout.write(fs.readFileSync(0, "utf8").toUpperCase() + fs.readFileSync("notes.txt", "utf8"));',
  );
  const notes = join(dir, 'notes.txt');
  writeFileSync(notes, 'from a file\n');
  const r = sandpit(['run', app, '--file', notes], { input: 'from stdin\n' });
  assert.equal(r.stdout, 'FROM STDIN\nfrom a file\n');
  assert.equal(r.code, 0, r.stderr);
});

test("the CLI exits with the sandbox's exit code", () => {
  const r = sandpit(['run', '-t', 'bash', '-c', 'echo out; echo err >&2; exit 7']);
  assert.equal(r.code, 7);
  assert.equal(r.stdout, 'out\n');
  assert.match(r.stderr, /err/);
});

test('a deadline gives exit code 124 and says so', () => {
  const r = sandpit(['run', '-t', 'bash', '--timeout', '1', '-c', 'sleep 20']);
  assert.equal(r.code, 124);
  assert.match(r.stderr, /TimedOut \(DeadlineExceeded\)/);
});

test('a policy denial exits 77 and names the field and the limit', () => {
  const r = sandpit(['run', '-t', 'python', '--memory', '8g', '-c', 'print(1)']);
  assert.equal(r.code, 77);
  assert.match(r.stderr, /resources\.memory: 8Gi is over the ceiling of 512Mi \(limit: 512Mi\)/);
  assert.equal(r.stdout, '');
});

test('an engine that does not answer exits 69 with the fix', () => {
  const r = sandpit(['run', '-c', 'print(1)'], { env: { SANDPIT_DOCKER_SOCKET_PATH: join(dir, 'no.sock') } });
  assert.equal(r.code, 69);
  assert.match(r.stderr, /Docker engine is not answering/);
  assert.match(r.stderr, /hint: .*sandpit setup/);
});

test('a bad config value fails start-up naming the field, its source and the accepted form', () => {
  const r = sandpit(['run', '-c', 'print(1)'], { env: { MAX_CONTAINER_MEMORY: 'lots' } });
  assert.equal(r.code, 78);
  assert.match(
    r.stderr,
    /sandbox\.maxMemory \(from env MAX_CONTAINER_MEMORY = "lots"\): expected a size like 512m/,
  );
});

test('runtime runsc runs the code under gVisor', () => {
  const r = sandpit(['run', '--runtime', 'runsc', '-c', 'import platform; print(platform.release())']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^4\.4\.0/, 'gVisor reports its own kernel version');
});

test('every command has --help', () => {
  for (const command of [[], ['run'], ['audit'], ['doctor'], ['setup'], ['images']]) {
    const r = sandpit([...command, '--help']);
    assert.equal(r.code, 0, `${command.join(' ')} --help: ${r.stderr}`);
    assert.match(r.stdout, /usage: sandpit/);
  }
});

test('sandpit doctor reports ready on this machine, and names the fix when the engine is missing', () => {
  const ok = sandpit(['doctor']);
  assert.equal(ok.code, 0, ok.stdout);
  assert.match(ok.stdout, /ready/);
  const down = sandpit(['doctor'], { env: { SANDPIT_DOCKER_SOCKET_PATH: join(dir, 'no.sock') } });
  assert.equal(down.code, 1);
  assert.match(down.stdout, /FAIL engine/);
  assert.match(down.stdout, /fix: sandpit setup/);
  const audit = sandpit(['doctor'], { env: { SANDPIT_AUDIT_FILE: '/dev/null/audit.jsonl' } });
  assert.equal(audit.code, 1);
  assert.match(
    audit.stdout,
    /FAIL audit +the audit file \/dev\/null\/audit\.jsonl cannot be written \(ENOTDIR\)/,
  );
  assert.match(audit.stdout, /fix: .*set audit\.file/);
  assert.match(ok.stdout, /ok +audit +writable: /);
  const runtime = sandpit(['doctor'], { env: { SANDPIT_SANDBOX_RUNTIME: 'kata' } });
  assert.equal(runtime.code, 1);
  assert.match(runtime.stdout, /FAIL runtime .*kata/);
});
