/**
 * The hostile gateway's own surface (issue 21), served over HTTP on loopback on Docker: requests
 * without a token, with a wrong one or with one in the query string; a second tenant reaching for
 * the first's runs, sessions and MCP session (NOT_FOUND, as for what does not exist: nothing
 * leaks); Host and Origin headers of another site (DNS rebinding); slow clients that hold
 * connections (short server.headersTimeoutSeconds / requestTimeoutSeconds) while others are
 * served; and the disconnect rule of docs/mcp.md: a stateless client that goes away mid-run, or a
 * stateful MCP session deleted or expired mid-run, takes its sandbox with it within 5 s, while a
 * stateful stream that is cut resumes and the run goes on.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  connectHttp,
  containerExists,
  containerRunning,
  cuttableProxy,
  recordNotifications,
  waitFor,
} from '../e2e/helpers.js';
import { CANARY, INITIALIZE } from './gateway.js';
import { MCP_ACCEPT } from '../support/mcp-raw.js';
import {
  assertNothingStarted,
  assertRefused,
  assertRpcRefused,
  assertToolRefused,
  leftovers,
  OTHER_TOKEN,
  send,
  serveOnDocker,
  type Served,
} from './served.js';

const HEADERS_TIMEOUT_S = 1;
const REQUEST_TIMEOUT_S = 2;
const SESSION_IDLE_S = 3;

let g: Served;
/** The canary's run, with a returned file, and its live session. */
let run: string;
let session: string;

// One suite, as every hostile category is, so the reliability report counts its cases.
describe('hostile: gateway surface (docker)', () => {
  before(async () => {
    g = await serveOnDocker({
      headersTimeoutSeconds: HEADERS_TIMEOUT_S,
      requestTimeoutSeconds: REQUEST_TIMEOUT_S,
      sessionIdleSeconds: SESSION_IDLE_S,
    });
    const ran = await send(g.url, '/runs', {
      body: { template: 'bash', code: 'echo secret > out.txt; echo done', outputs: ['out.txt'] },
    });
    assert.equal(ran.status, 200, ran.text);
    run = (ran.json as { runId: string }).runId;
    const created = await send(g.url, '/sessions', { body: { template: 'python' } });
    assert.equal(created.status, 201, created.text);
    session = (created.json as { id: string }).id;
  });

  after(async () => {
    await send(g.url, `/sessions/${session}`, { method: 'DELETE' });
    await g?.close();
    assert.deepEqual(await leftovers(g.docker), [], 'no container is left');
  });

  /** Every route that needs a token, with a body where it takes one. */
  function guardedRoutes(): { method: string; path: string; body?: unknown }[] {
    return [
      { method: 'POST', path: '/mcp', body: INITIALIZE },
      { method: 'GET', path: '/mcp' },
      { method: 'DELETE', path: '/mcp' },
      { method: 'GET', path: '/metrics' },
      { method: 'POST', path: '/runs', body: { template: 'python', code: 'print(1)' } },
      { method: 'GET', path: `/runs/${run}` },
      { method: 'GET', path: `/runs/${run}/files/out.txt` },
      { method: 'POST', path: '/sessions', body: { template: 'python' } },
      { method: 'GET', path: '/sessions' },
      { method: 'POST', path: `/sessions/${session}/exec`, body: { command: ['true'] } },
      { method: 'GET', path: `/sessions/${session}/files/x` },
    ];
  }

  /** A refusal of auth: 401 UNAUTHORIZED with a Bearer challenge, as JSON-RPC on /mcp. */
  function assertUnauthorized(answer: Awaited<ReturnType<typeof send>>, path: string): void {
    if (path.startsWith('/mcp')) assertRpcRefused(answer, 401, -32001, 'UNAUTHORIZED');
    else assertRefused(answer, 401, 'UNAUTHORIZED');
    assert.match(String(answer.headers['www-authenticate']), /^Bearer/, path);
  }

  test('no token: every guarded route is 401 with a Bearer challenge, on both transports; /health answers', async () => {
    const since = Date.now();
    for (const base of [g.url, g.statelessUrl])
      for (const { method, path, body } of guardedRoutes())
        assertUnauthorized(await send(base, path, { method, body, token: null, headers: MCP_ACCEPT }), path);
    assert.equal((await send(g.url, '/health', { token: null })).status, 200);
    await assertNothingStarted(g.docker, since);
  });

  test('a wrong token (another value, the canary cut or extended, another scheme, empty) is 401', async () => {
    const since = Date.now();
    const wrong = [
      `Bearer ${CANARY.slice(0, -1)}`,
      `Bearer ${CANARY}x`,
      `Bearer ${CANARY.slice(0, -1)}${CANARY.endsWith('0') ? '1' : '0'}`,
      'Bearer not-the-token-at-all',
      `Basic ${Buffer.from(`user:${CANARY}`).toString('base64')}`,
      `Token ${CANARY}`,
      'Bearer ',
      `Bearer ${'x'.repeat(8000)}`,
      CANARY,
    ];
    for (const authorization of wrong)
      for (const { method, path, body } of guardedRoutes())
        assertUnauthorized(
          await send(g.url, path, {
            method,
            body,
            token: null,
            headers: { ...MCP_ACCEPT, Authorization: authorization },
          }),
          path,
        );
    await assertNothingStarted(g.docker, since);
  });

  test('a token in the query string is never taken: 401 as without one', async () => {
    const since = Date.now();
    for (const name of ['access_token', 'token', 'auth', 'bearer'])
      for (const { method, path, body } of guardedRoutes())
        assertUnauthorized(
          await send(g.url, `${path}?${name}=${CANARY}`, { method, body, token: null, headers: MCP_ACCEPT }),
          path,
        );
    await assertNothingStarted(g.docker, since);
  });

  test('another token’s run is NOT_FOUND on every route and tool, exactly as a run that does not exist', async () => {
    const since = Date.now();
    const other = { token: OTHER_TOKEN };
    for (const [suffix, method] of [
      ['', 'GET'],
      ['', 'DELETE'],
      ['/files/out.txt', 'GET'],
      ['/artifacts', 'GET'],
    ] as const) {
      const theirs = await send(g.url, `/runs/${run}${suffix}`, { ...other, method });
      const none = await send(g.url, `/runs/run-000000000000${suffix}`, { ...other, method });
      assertRefused(theirs, 404, 'NOT_FOUND');
      assert.equal(
        theirs.text.replace(run, 'ID'),
        none.text.replace('run-000000000000', 'ID'),
        'nothing tells them apart',
      );
      assert.ok(!theirs.text.includes('secret'));
    }
    const c = await connectHttp(`${g.url}/mcp`, OTHER_TOKEN);
    try {
      await assertToolRefused(c.client, 'get_run', { runId: run }, 'NOT_FOUND');
      await assertToolRefused(c.client, 'cancel_run', { runId: run }, 'NOT_FOUND');
    } finally {
      await c.close();
    }
    const mine = await send(g.url, `/runs/${run}/files/out.txt`);
    assert.equal(mine.text, 'secret\n', 'the run is still its owner’s');
    await assertNothingStarted(g.docker, since);
  });

  test('another token’s session is NOT_FOUND on every route and tool, never listed, and still its owner’s', async () => {
    const since = Date.now();
    const other = { token: OTHER_TOKEN };
    const routes: [string, string, unknown?][] = [
      ['GET', ''],
      ['PATCH', '', { ttlSeconds: 60 }],
      ['DELETE', ''],
      ['POST', '/exec', { command: ['cat', '/etc/hostname'] }],
      ['GET', '/files'],
      ['GET', '/files/x'],
      ['PUT', '/files/x', 'planted'],
      ['DELETE', '/files/x'],
      ['GET', '/artifacts'],
      ['GET', '/logs'],
      ['GET', '/exec/exec-000000000000'],
    ];
    for (const [method, suffix, body] of routes) {
      const headers = typeof body === 'string' ? { 'Content-Type': 'application/octet-stream' } : undefined;
      const theirs = await send(g.url, `/sessions/${session}${suffix}`, { ...other, method, body, headers });
      const none = await send(g.url, `/sessions/ses-0000000000000000${suffix}`, {
        ...other,
        method,
        body,
        headers,
      });
      assertRefused(theirs, 404, 'NOT_FOUND');
      assert.equal(
        theirs.text.replace(session, 'ID'),
        none.text.replace('ses-0000000000000000', 'ID'),
        `${method} ${suffix}`,
      );
    }
    const listed = await send(g.url, '/sessions', other);
    assert.deepEqual((listed.json as { sessions: unknown[] }).sessions, []);
    const c = await connectHttp(`${g.url}/mcp`, OTHER_TOKEN);
    try {
      for (const [tool, args] of [
        ['sandbox_exec', { command: ['true'] }],
        ['sandbox_read_file', { path: 'x' }],
        ['sandbox_write_file', { path: 'x', content: 'planted' }],
        ['sandbox_list_files', {}],
        ['sandbox_delete', {}],
      ] as const)
        await assertToolRefused(c.client, tool, { sessionId: session, ...args }, 'NOT_FOUND');
      const list = (await c.client.callTool({ name: 'sandbox_list', arguments: {} })) as CallToolResult;
      assert.ok(!JSON.stringify(list).includes(session), 'not listed');
    } finally {
      await c.close();
    }
    const mine = await send(g.url, `/sessions/${session}/exec`, { body: { command: ['ls', '-A'] } });
    assert.equal(
      (mine.json as { stdout: string }).stdout,
      '',
      'nothing was planted; the session is its owner’s',
    );
    await assertNothingStarted(g.docker, since);
  });

  test('another token presenting the canary’s MCP session id gets 404, and cannot end it', async () => {
    const c = await connectHttp(`${g.url}/mcp`, CANARY);
    try {
      const id = c.sessionId;
      assert.ok(id);
      const headers = { ...MCP_ACCEPT, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' };
      const list = { jsonrpc: '2.0', id: 9, method: 'tools/list' };
      assertRpcRefused(await send(g.url, '/mcp', { token: OTHER_TOKEN, body: list, headers }), 404, -32001);
      assertRpcRefused(
        await send(g.url, '/mcp', { token: OTHER_TOKEN, method: 'GET', headers }),
        404,
        -32001,
      );
      assertRpcRefused(
        await send(g.url, '/mcp', { token: OTHER_TOKEN, method: 'DELETE', headers }),
        404,
        -32001,
      );
      const still = await c.client.listTools();
      assert.ok(still.tools.length > 0, 'the canary’s session lives on');
    } finally {
      await c.close();
    }
  });

  test('a Host header naming another site (DNS rebinding) is 403 FORBIDDEN on every route; loopback names pass', async () => {
    const since = Date.now();
    const port = new URL(g.url).port;
    for (const host of [
      'evil.example',
      `evil.example:${port}`,
      'localhost.evil.example',
      '127.0.0.1.nip.io',
      '0.0.0.0',
      '[::ffff:127.0.0.1]',
    ])
      for (const { method, path, body } of [
        ...guardedRoutes(),
        { method: 'GET', path: '/health' },
        { method: 'GET', path: '/openapi.json' },
      ]) {
        const answer = await send(g.url, path, { method, body, headers: { ...MCP_ACCEPT, Host: host } });
        if (path.startsWith('/mcp')) assertRpcRefused(answer, 403, -32001, 'FORBIDDEN');
        else assertRefused(answer, 403, 'FORBIDDEN');
      }
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `LOCALHOST:${port}`])
      assert.equal((await send(g.url, '/sessions', { headers: { Host: host } })).status, 200, host);
    await assertNothingStarted(g.docker, since);
  });

  test('an Origin of another site, or null, is 403 FORBIDDEN; the gateway’s own origin passes', async () => {
    const since = Date.now();
    for (const origin of [
      'http://evil.example',
      'null',
      `http://localhost.evil.example:${new URL(g.url).port}`,
      'file://',
    ])
      for (const { method, path, body } of guardedRoutes()) {
        const answer = await send(g.url, path, { method, body, headers: { ...MCP_ACCEPT, Origin: origin } });
        if (path.startsWith('/mcp')) assertRpcRefused(answer, 403, -32001, 'FORBIDDEN');
        else assertRefused(answer, 403, 'FORBIDDEN', 'Origin');
      }
    assert.equal((await send(g.url, '/sessions', { headers: { Origin: g.url } })).status, 200);
    await assertNothingStarted(g.docker, since);
  });

  /** A raw connection to the gateway that sends `head` now, then one byte every `dripMs`; resolves with what the server answered and when it closed. */
  function slowClient(
    head: string,
    dripMs: number,
  ): { closed: Promise<{ answer: string; afterMs: number }>; socket: Socket } {
    const t0 = performance.now();
    const socket = connect(Number(new URL(g.url).port), '127.0.0.1');
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.write(head);
    const drip = setInterval(() => socket.writable && socket.write('x'), dripMs);
    const closed = new Promise<{ answer: string; afterMs: number }>((resolve) =>
      socket.on('close', () => {
        clearInterval(drip);
        resolve({ answer, afterMs: performance.now() - t0 });
      }),
    );
    return { closed, socket };
  }

  /** How long the gateway takes to answer /health and an MCP tool call now. */
  async function responsiveness(): Promise<number> {
    const t0 = performance.now();
    assert.equal((await send(g.url, '/health', { token: null })).status, 200);
    const c = await connectHttp(`${g.url}/mcp`, CANARY);
    try {
      const r = (await c.client.callTool({ name: 'list_templates', arguments: {} })) as CallToolResult;
      assert.notEqual(r.isError, true);
    } finally {
      await c.close();
    }
    return performance.now() - t0;
  }

  test('slowloris: connections that dribble their headers are answered 408 and closed at the headers timeout; others are served meanwhile', async () => {
    const slow = Array.from({ length: 32 }, () =>
      slowClient(
        `GET /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${CANARY}\r\nX-Slow: `,
        200,
      ),
    );
    for (let i = 0; i < 3; i++) {
      const ms = await responsiveness();
      assert.ok(ms < 2000, `answered in ${ms.toFixed(0)} ms while 32 clients dribble`);
    }
    for (const { closed } of slow) {
      const { answer, afterMs } = await closed;
      assert.match(answer, /^HTTP\/1\.1 408/);
      assert.ok(afterMs < HEADERS_TIMEOUT_S * 1000 + 2000, `closed after ${afterMs.toFixed(0)} ms`);
    }
  });

  test('a slow body: a request whose body never completes is answered 408 and closed at the request timeout; others are served meanwhile', async () => {
    const body = JSON.stringify({ template: 'python', code: 'print(1)' });
    const head =
      `POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${CANARY}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length + 1000}\r\n\r\n${body.slice(0, 10)}`;
    const since = Date.now();
    const slow = Array.from({ length: 16 }, () => slowClient(head, 250));
    const ms = await responsiveness();
    assert.ok(ms < 2000, `answered in ${ms.toFixed(0)} ms while 16 bodies trickle`);
    for (const { closed } of slow) {
      const { answer, afterMs } = await closed;
      assert.match(answer, /^HTTP\/1\.1 408/);
      assert.ok(afterMs < REQUEST_TIMEOUT_S * 1000 + 2000, `closed after ${afterMs.toFixed(0)} ms`);
    }
    await assertNothingStarted(g.docker, since);
  });

  /** A program that prints, then sleeps with `marker` on its command line, where containerRunning finds it. */
  function sleeper(marker: string): string {
    return `import subprocess\nprint('started', flush=True)\nsubprocess.run(['sh', '-c', 'sleep 60; : "$0"', '${marker}'])`;
  }

  /** Waits for the container running `marker`, runs `cut`, and asserts the container went within 5 s of it. */
  async function goneWithin5s(marker: string, cut: () => void | Promise<void>, graceMs = 0): Promise<void> {
    const container = await waitFor('the container running the program', () =>
      containerRunning(g.docker, process.pid, marker),
    );
    const t0 = performance.now();
    await cut();
    await waitFor(
      'the container to be removed',
      async () => ((await containerExists(g.docker, container)) ? undefined : true),
      graceMs + 5000,
    );
    const seconds = (performance.now() - t0 - graceMs) / 1000;
    assert.ok(seconds < 5, `the container went ${seconds.toFixed(1)} s after the cut`);
  }

  /** A tools/call of run_code as a raw POST whose response is an SSE stream the test can drop. */
  function rawCall(base: string, code: string, headers: Record<string, string> = {}): { drop: () => void } {
    const { port } = new URL(base);
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'run_code', arguments: { code } },
    });
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      path: '/mcp',
      method: 'POST',
      headers: {
        Authorization: `Bearer ${CANARY}`,
        'Content-Type': 'application/json',
        ...MCP_ACCEPT,
        ...headers,
      },
    });
    req.on('error', () => undefined);
    req.end(body);
    return { drop: () => req.destroy() };
  }

  test('stateless: a client that disconnects mid-run takes its sandbox with it within 5 s', async () => {
    const marker = `hostile-stateless-${Date.now()}`;
    const call = rawCall(g.statelessUrl, sleeper(marker));
    await goneWithin5s(marker, () => call.drop());
  });

  test('stateful: an MCP session deleted mid-run takes its sandbox with it within 5 s', async () => {
    const c = await connectHttp(`${g.url}/mcp`, CANARY);
    const marker = `hostile-deleted-${Date.now()}`;
    const settled = c.client
      .callTool({ name: 'run_code', arguments: { code: sleeper(marker) } }, undefined, { timeout: 60_000 })
      .then(
        () => 'resolved',
        () => 'rejected',
      );
    try {
      await goneWithin5s(marker, async () => {
        const deleted = await send(g.url, '/mcp', {
          method: 'DELETE',
          headers: { 'mcp-session-id': c.sessionId ?? '', 'mcp-protocol-version': '2025-06-18' },
        });
        assert.equal(deleted.status, 200, deleted.text);
      });
    } finally {
      await c.client.close();
    }
    assert.equal(await settled, 'rejected', 'the call never got a result');
  });

  // These three mostly wait (for an expiry, a sleep, a reconnection): side by side, they take the time of one.
  describe('stateful sessions that outlive a request', { concurrency: true }, () => {
    test('stateful: an MCP session whose client cut its stream and never came back expires, and its sandbox goes within 5 s of that', async () => {
      const opened = await send(g.url, '/mcp', { body: INITIALIZE, headers: MCP_ACCEPT });
      const id = String(opened.headers['mcp-session-id']);
      const marker = `hostile-expired-${Date.now()}`;
      const call = rawCall(g.url, sleeper(marker), {
        'mcp-session-id': id,
        'mcp-protocol-version': '2025-06-18',
      });
      // Expiry comes SESSION_IDLE_S after the last request, swept every half of it.
      await goneWithin5s(marker, () => call.drop(), SESSION_IDLE_S * 1500);
      const gone = await send(g.url, '/mcp', {
        body: { jsonrpc: '2.0', id: 8, method: 'tools/list' },
        headers: { ...MCP_ACCEPT, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' },
      });
      assertRpcRefused(gone, 404, -32001);
    });

    test('stateful: a call that runs longer than the session idle time, on a connected client, runs to its result', async () => {
      const c = await connectHttp(`${g.url}/mcp`, CANARY);
      try {
        const r = (await c.client.callTool(
          {
            name: 'run_code',
            arguments: { code: `import time\ntime.sleep(${SESSION_IDLE_S + 1})\nprint('woke')` },
          },
          undefined,
          { timeout: 60_000 },
        )) as CallToolResult;
        const result = r.structuredContent as { phase: string; stdout: string };
        assert.equal(result.phase, 'Succeeded', JSON.stringify(r));
        assert.equal(result.stdout, 'woke\n');
      } finally {
        await c.close();
      }
    });

    test('stateful, resumable: a stream cut mid-run does not cancel it; the client resumes and gets the rest and the result', async () => {
      const proxy = await cuttableProxy(Number(new URL(g.url).port));
      const c = await connectHttp(proxy.url, CANARY);
      try {
        const { notices } = recordNotifications(c.client);
        const call = c.client.callTool(
          {
            name: 'run_code',
            arguments: {
              code: "import time\nprint('before', flush=True)\ntime.sleep(2)\nprint('after', flush=True)",
            },
          },
          undefined,
          { timeout: 60_000 },
        );
        await waitFor(
          'the first output',
          () => notices.some((n) => n.logger === 'stdout' && String(n.data).includes('before')) || undefined,
        );
        const before = proxy.connections();
        proxy.cut();
        const r = (await call) as CallToolResult;
        const result = r.structuredContent as { phase: string; stdout: string };
        assert.equal(result.phase, 'Succeeded', JSON.stringify(r));
        assert.equal(result.stdout, 'before\nafter\n');
        assert.ok(proxy.connections() > before, 'the client reconnected');
      } finally {
        await c.close();
        await proxy.close();
      }
    });
  });
});
