/**
 * The session WebSocket through the real HTTP server on loopback, over the in-memory session
 * backend: the channels (stdin in, output out, the exit last), resize, and every refusal: no
 * token, a token in the query string, a foreign Origin, a foreign Host, another token's session,
 * garbage frames. A real tty and real programs behind it are the e2e tier's.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { Channel, EXEC_WS_PROTOCOL } from '../../../src/gateway/http/exec-ws.js';
import type { Listening } from '../../../src/gateway/http/listen.js';
import { serveMemoryGateway, type MemoryGateway } from '../../support/memory-gateway.js';
import type { MemorySandbox } from '../../support/memory-sessions.js';

const TOKEN = 'admin-token-0123456789';
const OTHER = 'other-token-0123456789';
let gateway: MemoryGateway;
let server: Listening;
let sandboxes: MemorySandbox[];
let metrics: MemoryGateway['metrics'];

before(async () => {
  gateway = await serveMemoryGateway({
    token: TOKEN,
    other: OTHER,
    allowedHosts: ['127.0.0.1'],
    webSocket: true,
  });
  ({ server, metrics, sandboxes } = gateway);
});
after(() => gateway.close());

async function newSession(token = TOKEN): Promise<string> {
  const res = await fetch(`${server.url}/sessions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: '{"template":"python"}',
  });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
}

const wsUrl = (id: string, query = '') =>
  `${server.url.replace('http', 'ws')}/sessions/${id}/exec/ws${query}`;

interface Received {
  out: Buffer[];
  exit: Record<string, unknown> | undefined;
  closeCode: number;
  protocol: string;
}

/** Opens the socket, sends `messages` once it is open, and collects everything until it closes. */
function talk(
  url: string,
  options: { headers?: Record<string, string>; protocols?: string[] },
  messages: (Buffer | string)[],
): Promise<Received> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols ?? [EXEC_WS_PROTOCOL], { headers: options.headers });
    const got: Received = { out: [], exit: undefined, closeCode: 0, protocol: '' };
    ws.on('open', () => {
      got.protocol = ws.protocol;
      for (const m of messages) ws.send(m, { binary: typeof m !== 'string' });
    });
    ws.on('message', (data: Buffer) => {
      if (data[0] === Channel.exit)
        got.exit = JSON.parse(data.subarray(1).toString()) as Record<string, unknown>;
      else got.out.push(data);
    });
    ws.on('close', (code) => resolve({ ...got, closeCode: code }));
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () =>
        reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode, body })),
      );
    });
    ws.on('error', (e) => {
      if (!e.message.startsWith('Unexpected server response')) reject(e);
    });
  });
}

/** The HTTP refusal of an upgrade: its status and JSON error. */
async function refusal(
  url: string,
  options: { headers?: Record<string, string>; protocols?: string[] },
): Promise<{ status: number; error: { code: string; message: string; hint?: string } }> {
  try {
    await talk(url, options, []);
  } catch (e) {
    const { status, body } = e as { status: number; body: string };
    return { status, error: (JSON.parse(body) as { error: { code: string; message: string } }).error };
  }
  assert.fail('the upgrade was accepted');
}

const bearer = (token = TOKEN) => ({ Authorization: `Bearer ${token}` });
const stdin = (text: string) => Buffer.concat([Buffer.of(Channel.stdin), Buffer.from(text)]);
const control = (channel: number, body = '') => Buffer.concat([Buffer.of(channel), Buffer.from(body)]);

describe('session WebSocket', () => {
  test('stdin streams in, output streams out, the exit comes last and the socket closes 1000', async () => {
    const id = await newSession();
    const got = await talk(wsUrl(id), { headers: bearer() }, [
      JSON.stringify({ command: ['cat'], tty: true, cols: 100, rows: 30 }),
      stdin('hello '),
      stdin('world'),
      control(Channel.resize, '{"cols":132,"rows":43}'),
      control(Channel.stdinEnd),
    ]);
    assert.equal(got.protocol, EXEC_WS_PROTOCOL);
    assert.equal(got.closeCode, 1000);
    assert.ok(got.out.every((m) => m[0] === Channel.stdout));
    assert.equal(Buffer.concat(got.out.map((m) => m.subarray(1))).toString(), 'hello world');
    assert.equal(got.exit?.exitCode, 0);
    assert.equal(got.exit?.sessionId, id);
    assert.match(String(got.exit?.execId), /^exec-/);
    assert.deepEqual(sandboxes.at(-1)?.terminal, { cols: 132, rows: 43 });
  });

  test('the token may come as the subprotocol bearer.<token>, and is never echoed back', async () => {
    const id = await newSession();
    const got = await talk(wsUrl(id), { protocols: [EXEC_WS_PROTOCOL, `bearer.${TOKEN}`] }, [
      JSON.stringify({ command: ['echo', 'hi'] }),
    ]);
    assert.equal(got.protocol, EXEC_WS_PROTOCOL);
    assert.equal(got.exit?.exitCode, 0);
    assert.equal(Buffer.concat(got.out.map((m) => m.subarray(1))).toString(), 'echo hi\n');
  });

  test('no token: 401 with WWW-Authenticate', async () => {
    const id = await newSession();
    const r = await refusal(wsUrl(id), {});
    assert.equal(r.status, 401);
    assert.equal(r.error.code, 'UNAUTHORIZED');
  });

  test('a token in the query string is refused, even a valid one', async () => {
    const id = await newSession();
    for (const query of [`?token=${TOKEN}`, `?access_token=${TOKEN}`]) {
      const r = await refusal(wsUrl(id, query), { headers: bearer() });
      assert.equal(r.status, 400);
      assert.equal(r.error.code, 'INVALID_REQUEST');
      assert.match(r.error.message, /query/);
      assert.ok(!JSON.stringify(r).includes(TOKEN), 'the refusal does not repeat the token');
    }
  });

  test('a foreign Origin is refused; the gateway’s own origin is not', async () => {
    const id = await newSession();
    const r = await refusal(wsUrl(id), { headers: { ...bearer(), Origin: 'https://evil.example' } });
    assert.equal(r.status, 403);
    assert.match(r.error.message, /Origin/);
    const own = await talk(wsUrl(id), { headers: { ...bearer(), Origin: server.url } }, [
      JSON.stringify({ command: ['true'] }),
    ]);
    assert.equal(own.exit?.exitCode, 0);
  });

  test('a Host header the gateway does not serve is refused (DNS rebinding)', async () => {
    const id = await newSession();
    const r = await refusal(wsUrl(id), { headers: { ...bearer(), Host: 'rebound.example' } });
    assert.equal(r.status, 403);
    assert.match(r.error.message, /Host/);
  });

  test('another token’s session and an unknown one are both 404; nothing runs', async () => {
    const id = await newSession();
    const foreign = await refusal(wsUrl(id), { headers: bearer(OTHER) });
    assert.equal(foreign.status, 404);
    const unknown = await refusal(wsUrl('sess-nope'), { headers: bearer() });
    assert.equal(unknown.status, 404);
    const logs = await fetch(`${server.url}/sessions/${id}/logs`, { headers: bearer() });
    assert.deepEqual(((await logs.json()) as { execs: unknown[] }).execs, []);
  });

  test('garbage frames end the socket with an error naming what was wrong, and kill the exec', async () => {
    const id = await newSession();
    const cases: { messages: (Buffer | string)[]; field: string }[] = [
      { messages: [Buffer.from([0xde, 0xad, 0xbe, 0xef])], field: 'message' },
      { messages: ['{"command": ['], field: 'message' },
      { messages: ['{"command": "ls"}'], field: 'command' },
      { messages: ['{"command": ["ls"], "cols": 0, "tty": true}'], field: 'cols' },
      { messages: ['{"command": ["cat"]}', control(9, 'x')], field: 'channel' },
      { messages: ['{"command": ["cat"]}', 'plain text after the start'], field: 'message' },
      { messages: ['{"command": ["cat"]}', control(Channel.resize, 'not json')], field: 'resize' },
    ];
    for (const c of cases) {
      const got = await talk(wsUrl(id), { headers: bearer() }, c.messages);
      const error = got.exit?.error as { code: string; violations?: { field: string }[] } | undefined;
      assert.equal(got.closeCode, 4400, JSON.stringify(got.exit));
      assert.equal(error?.code, 'INVALID_REQUEST');
      assert.ok(
        error?.violations?.some((v) => v.field === c.field),
        `${JSON.stringify(c.messages.map(String))}: ${JSON.stringify(error)}`,
      );
    }
    const view = await fetch(`${server.url}/sessions/${id}`, { headers: bearer() });
    assert.deepEqual(((await view.json()) as { runningExecs: string[] }).runningExecs, []);
  });

  test('upgrades are counted by route, with bounded labels', async () => {
    const text = await metrics.registry.metrics();
    assert.match(text, /sandpit_http_requests_total\{[^}]*route="\/sessions\/:id\/exec\/ws",status="101"/);
    assert.match(text, /route="\/sessions\/:id\/exec\/ws",status="404"/);
  });
});
