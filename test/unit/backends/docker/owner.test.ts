import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { currentOwner, ownerAlive } from '../../../../src/backends/docker/owner.js';

test('currentOwner is host:pid:starttime of this process', () => {
  const [host, pid, start] = currentOwner().split(':');
  assert.equal(host, hostname());
  assert.equal(pid, String(process.pid));
  const stat = readFileSync(`/proc/${process.pid}/stat`, 'utf8');
  // field 22 of /proc/PID/stat
  assert.equal(start, stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  assert.match(start!, /^[1-9]\d*$/);
});

test('this process is alive', () => {
  assert.equal(ownerAlive(currentOwner()), true);
});

test('the same pid with another start time is a dead owner whose pid was reused', () => {
  const [host, pid, start] = currentOwner().split(':');
  assert.equal(ownerAlive(`${host}:${pid}:${Number(start) + 1}`), false);
  assert.equal(ownerAlive(`${host}:${pid}:0`), false);
});

test('a process that has exited is dead', async () => {
  const child = spawn(process.execPath, ['-e', '']);
  const pid = child.pid!;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  const owner = `${hostname()}:${pid}:${start}`;
  await once(child, 'exit');
  // once reaped, /proc/PID is gone (or, if the pid is reused, has another start time)
  assert.equal(ownerAlive(owner), false);
});

test('a pid that does not exist is dead', () => {
  assert.equal(ownerAlive(`${hostname()}:4194304:12345`), false); // above pid_max's hard limit
  assert.equal(ownerAlive(`${hostname()}:notapid:1`), false);
});

test('an owner on another host is assumed alive (we cannot tell)', () => {
  assert.equal(ownerAlive('some-other-host:4194304:1'), true);
  assert.equal(ownerAlive(`${hostname()}x:4194304:1`), true);
});

test('a malformed owner without a pid is left alone', () => {
  assert.equal(ownerAlive(''), true);
  assert.equal(ownerAlive(`${hostname()}`), true);
  assert.equal(ownerAlive(`${hostname()}:`), true);
});

test('a command name with spaces and parentheses does not confuse the start time', async () => {
  // the comm field of /proc/PID/stat is "(name)", and the name is the executable's file name
  const dir = mkdtempSync(join(tmpdir(), 'sandpit-owner-'));
  const exe = join(dir, 'x) y (z');
  symlinkSync('/bin/sleep', exe);
  const child = spawn(exe, ['5']);
  try {
    await once(child, 'spawn');
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
    assert.ok(stat.includes('(x) y (z)'), stat);
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    const owner = `${hostname()}:${child.pid}:${start}`;
    assert.equal(ownerAlive(owner), true);
    // a naive split on spaces would read another field; make sure the start time is the real one
    assert.equal(
      ownerAlive(`${hostname()}:${child.pid}:${stat.split(' ')[21]}`),
      stat.split(' ')[21] === start,
    );
  } finally {
    child.kill('SIGKILL');
    await once(child, 'exit');
    rmSync(dir, { recursive: true, force: true });
  }
});
