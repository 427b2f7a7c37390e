/**
 * The session WebSocket end to end on the real engine, through the built `sandpit serve`: a
 * Python REPL under a real pseudo-terminal (the runner's), a resize the program sees, streamed
 * stdin to a plain exec with its end of file, a client that goes away killing its exec, and the
 * refusals of the upgrade (no token, a token in the query string, a foreign Origin).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Channel } from '../../src/gateway/http/exec-ws.js';
import { requireDocker } from '../support/docker.js';
import { Terminal } from './exec-ws-client.js';
import { ensureBuilt, startServe, type Served } from './helpers.js';

const TOKEN = 'sessions-ws-token-0123456';
const auth = { Authorization: `Bearer ${TOKEN}` };

let served: Served;
before(async () => {
  ensureBuilt();
  await requireDocker();
  served = await startServe({ auth: { token: TOKEN }, logging: { level: 'warn' } });
});
after(() => served?.stop());

async function createSession(): Promise<string> {
  const res = await fetch(`${served.url}/sessions`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: '{"template":"python"}',
  });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
}

async function session(id: string): Promise<{ runningExecs: string[] }> {
  const res = await fetch(`${served.url}/sessions/${id}`, { headers: auth });
  return (await res.json()) as { runningExecs: string[] };
}

/** An exec socket to `served`, as this file's token unless told otherwise. */
const terminal = (id: string, headers: Record<string, string> = auth, query = ''): Terminal =>
  new Terminal(served.url, id, headers, query);

describe('session WebSocket (sandpit serve, real engine)', { timeout: 180_000 }, () => {
  test('a Python REPL under a pty: it sees a terminal, its size and a resize, and exits cleanly', async () => {
    const id = await createSession();
    const t = terminal(id);
    await t.opened();
    t.start({ command: ['python3', '-q', '-i'], tty: true, cols: 100, rows: 30 });
    await t.waitFor(/>>> /);
    t.send(Channel.stdin, 'import os, sys; print("tty", sys.stdin.isatty(), os.get_terminal_size())\n');
    await t.waitFor(/tty True os\.terminal_size\(columns=100, lines=30\)/);
    t.send(Channel.resize, JSON.stringify({ cols: 132, rows: 43 }));
    // The resize reaches the pty before the next line does: both go through the one runner channel in order.
    t.send(Channel.stdin, 'print("now", os.get_terminal_size())\n');
    await t.waitFor(/now os\.terminal_size\(columns=132, lines=43\)/);
    t.send(Channel.stdin, 'print(6 * 7)\n');
    await t.waitFor(/\r\n42\r\n/);
    t.send(Channel.stdin, 'raise SystemExit(3)\n');
    assert.equal(await t.closed, 1000);
    assert.equal(t.exit?.exitCode, 3, JSON.stringify(t.exit));
    assert.deepEqual([...t.streams], [Channel.stdout], 'a tty has one output stream');
  });

  test('streamed stdin to a plain exec: every byte arrives, and the end of stdin ends it', async () => {
    const id = await createSession();
    const t = terminal(id);
    await t.opened();
    t.start({ shell: 'wc -c; echo done >&2' });
    const piece = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 16; i++) t.send(Channel.stdin, piece);
    t.send(Channel.stdinEnd);
    assert.equal(await t.closed, 1000);
    assert.equal(t.exit?.exitCode, 0, JSON.stringify(t.exit));
    assert.match(t.output, new RegExp(`^${16 * 64 * 1024}\\n`));
    assert.ok(t.streams.has(Channel.stderr), 'stderr comes on channel 2');
    assert.match(String(t.exit?.stderr), /done/);
  });

  test('a client that goes away kills its exec', async () => {
    const id = await createSession();
    const t = terminal(id);
    await t.opened();
    t.start({ shell: 'echo started; sleep 600' });
    await t.waitFor(/started/);
    assert.equal((await session(id)).runningExecs.length, 1);
    t.ws.terminate();
    for (let i = 0; (await session(id)).runningExecs.length > 0; i++) {
      assert.ok(i < 200, 'the exec was not killed after its client went away');
      await new Promise((r) => setTimeout(r, 100));
    }
    const logs = await fetch(`${served.url}/sessions/${id}/logs`, { headers: auth });
    const [entry] = ((await logs.json()) as { execs: { result: { phase: string; exitCode: unknown } }[] })
      .execs;
    assert.notEqual(entry?.result.phase, 'Succeeded', JSON.stringify(entry));
  });

  test('refused before the upgrade: no token, a token in the query string, a foreign Origin', async () => {
    const id = await createSession();
    const cases: [Record<string, string>, string, number][] = [
      [{}, '', 401],
      [{}, `?token=${TOKEN}`, 400],
      [{ ...auth, Origin: 'https://attacker.example' }, '', 403],
    ];
    for (const [headers, query, status] of cases) {
      const t = terminal(id, headers, query);
      await assert.rejects(t.opened(), (e: { status: number; message: string }) => {
        assert.equal(e.status, status, e.message);
        assert.ok(!e.message.includes(TOKEN));
        return true;
      });
    }
    assert.deepEqual((await session(id)).runningExecs, []);
  });
});
