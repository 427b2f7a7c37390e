/**
 * Sessions end to end on the real engine, through the built `sandpit serve`: the seed's use case 1
 * as its curl commands send it (with an artifact downloaded), use case 2 (compile C in a session,
 * run it, download the binary), use case 4 (two sessions cannot see each other; a new one starts
 * clean), another token's session a 404, `/metrics` parsed by a Prometheus text parser with the
 * session counters moving, and the same flows over MCP with the SDK's client on HTTP and stdio:
 * three commands sharing files and state in one session, and resources/subscribe on a session
 * file notifying when an exec changes it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { requireDocker } from '../support/docker.js';
import { labelSets, observations, parseMetrics, sampleValue, type Scrape } from '../support/prometheus.js';
import { connectHttp, connectStdio, ensureBuilt, startServe, type Served } from './helpers.js';
import { JSON_TYPE, mcpSessionFlow, restClient, seedCurlFlow, toolCaller } from './session-flows.js';

const TOKEN = 'sessions-admin-token-0123';
const OTHER = 'sessions-other-token-0123';
let served: Served;
before(async () => {
  ensureBuilt();
  await requireDocker();
  served = await startServe({
    auth: { token: TOKEN, tokens: [{ name: 'other', token: OTHER }] },
    logging: { level: 'warn' },
  });
});
after(() => served?.stop());

const { auth, rest, createSession, exec } = restClient(() => served.url, TOKEN);

describe('sessions over REST (sandpit serve, real engine)', () => {
  test("use case 1: the seed's curl flow, then an artifact the script wrote is downloaded", () =>
    seedCurlFlow(restClient(() => served.url, TOKEN)));

  test('use case 2: compile a C program in a session, run it, download the binary', async () => {
    const id = await createSession('{"template":"c"}');
    const source = '#include <stdio.h>\nint main(void) { puts("built here"); return 0; }\n';
    assert.equal((await rest('PUT', `/sessions/${id}/files/hello.c`, source)).status, 201);
    const build = await exec(id, ['gcc', '-O2', '-o', 'hello', 'hello.c']);
    assert.equal(build.exitCode, 0, JSON.stringify(build));
    assert.equal((await exec(id, ['./hello'])).stdout, 'built here\n');
    const binary = await rest('GET', `/sessions/${id}/files/hello`);
    assert.equal(binary.status, 200);
    assert.deepEqual([...binary.bytes.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], 'an ELF binary');
    await rest('DELETE', `/sessions/${id}`);
  });

  test('use case 4: two sessions cannot see each other; a new one starts clean; another token gets 404', async () => {
    const a = await createSession();
    const b = await createSession();
    await exec(a, ['sh', '-c', 'echo secret > mine.txt; sleep 300 >/dev/null 2>&1 & echo started']);
    const seen = await exec(b, [
      'sh',
      '-c',
      'ls -A /workspace; cat /proc/[0-9]*/cmdline | tr "\\0" " " | grep -c "sleep 30[0]" || true',
    ]);
    assert.equal(seen.stdout, '0\n', JSON.stringify(seen));
    await rest('DELETE', `/sessions/${a}`);
    const c = await createSession();
    assert.equal((await exec(c, ['ls', '-A', '/workspace'])).stdout, '');
    const foreign = await rest('GET', `/sessions/${c}`, undefined, auth(OTHER));
    assert.equal(foreign.status, 404, foreign.text);
    assert.equal(
      (await rest('POST', `/sessions/${c}/exec`, '{"command":["id"]}', { ...JSON_TYPE, ...auth(OTHER) }))
        .status,
      404,
    );
    await rest('DELETE', `/sessions/${b}`);
    await rest('DELETE', `/sessions/${c}`);
  });
});

describe('metrics of a REST session flow', () => {
  async function scrape(): Promise<Scrape> {
    const res = await fetch(`${served.url}/metrics`, { headers: auth() });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return await parseMetrics(await res.text());
  }

  test('/metrics parses with a Prometheus text parser, and the session counters move', async () => {
    const docker = { backend: 'docker' };
    const before = await scrape();
    const id = await createSession('{"template":"bash"}');
    const during = await scrape();
    const content = 'x'.repeat(1000);
    assert.equal((await rest('PUT', `/sessions/${id}/files/f.txt`, content)).status, 201);
    assert.equal((await exec(id, ['cat', 'f.txt'])).exitCode, 0);
    assert.equal((await exec(id, ['sh', '-c', 'exit 3'])).exitCode, 3);
    assert.equal((await rest('GET', `/sessions/${id}/files/f.txt`)).text, content);
    assert.equal((await rest('DELETE', `/sessions/${id}`)).status, 200);
    const after = await scrape();

    const moved = (name: string, labels: Record<string, string> = {}) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    assert.equal(
      sampleValue(during, 'sandpit_sessions', docker) - sampleValue(before, 'sandpit_sessions', docker),
      1,
    );
    assert.equal(moved('sandpit_sessions', docker), 0, 'back down once deleted');
    assert.equal(moved('sandpit_sessions_created_total', { ...docker, served: 'cold' }), 1);
    assert.equal(
      moved('sandpit_sessions_ended_total', { ...docker, state: 'Deleted', reason: 'Deleted' }),
      1,
    );
    assert.equal(
      moved('sandpit_session_execs_total', { ...docker, phase: 'Succeeded', reason: 'Completed' }),
      1,
    );
    assert.equal(moved('sandpit_session_execs_total', { ...docker, phase: 'Failed', reason: 'Error' }), 1);
    assert.equal(
      observations(after, 'sandpit_session_exec_duration_seconds', docker) -
        observations(before, 'sandpit_session_exec_duration_seconds', docker),
      2,
    );
    assert.equal(moved('sandpit_session_file_bytes_total', { direction: 'in' }), 1000);
    assert.equal(moved('sandpit_session_file_bytes_total', { direction: 'out' }), 1000);
    for (const [method, route, status, n] of [
      ['POST', '/sessions', '201', 1],
      ['PUT', '/sessions/:id/files/*path', '201', 1],
      ['POST', '/sessions/:id/exec', '200', 2],
      ['GET', '/sessions/:id/files/*path', '200', 1],
      ['DELETE', '/sessions/:id', '200', 1],
    ] as const)
      assert.equal(moved('sandpit_http_requests_total', { method, route, status }), n, `${method} ${route}`);
    assert.ok(
      labelSets(after, 'sandpit_http_requests_total').every((l) => !/ses-/.test(l.route ?? '')),
      'routes are patterns, never paths',
    );
  });
});

describe('sessions over MCP (the SDK client)', () => {
  test('HTTP: three commands share files and state in one session', async () => {
    const connected = await connectHttp(`${served.url}/mcp`, TOKEN);
    try {
      await mcpSessionFlow(connected);
    } finally {
      await connected.close();
    }
  });

  test('HTTP: resources/subscribe on a session file notifies when an exec changes it, until unsubscribed', async () => {
    const connected = await connectHttp(`${served.url}/mcp`, TOKEN);
    const updated: string[] = [];
    connected.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updated.push(n.params.uri);
    });
    const call = toolCaller(connected);
    try {
      const id = (await call('sandbox_create', { language: 'bash' })).id as string;
      await call('sandbox_write_file', { sessionId: id, path: 'watched.txt', content: 'one\n' });
      const uri = `sandpit://sessions/${id}/files/watched.txt`;
      await connected.client.subscribeResource({ uri });
      await call('sandbox_exec', { sessionId: id, command: ['sh', '-c', 'echo two >> watched.txt'] });
      const deadline = Date.now() + 10_000;
      while (!updated.includes(uri) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.ok(updated.includes(uri), `notified: ${JSON.stringify(updated)}`);
      assert.ok(
        updated.every((u) => u === uri),
        'only the subscribed file',
      );
      const read = await connected.client.readResource({ uri });
      assert.deepEqual(read.contents, [{ uri, mimeType: 'text/plain', text: 'one\ntwo\n' }]);
      await connected.client.unsubscribeResource({ uri });
      const seen = updated.length;
      await call('sandbox_exec', { sessionId: id, command: ['sh', '-c', 'echo three >> watched.txt'] });
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(updated.length, seen, 'nothing after unsubscribe');
      await call('sandbox_delete', { sessionId: id });
    } finally {
      await connected.close();
    }
  });

  test('stdio: the same flow; the server ends its sessions when it exits', async () => {
    const connected = await connectStdio();
    try {
      await mcpSessionFlow(connected);
    } finally {
      await connected.close();
    }
  });
});
