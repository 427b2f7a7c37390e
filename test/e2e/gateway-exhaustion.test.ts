/**
 * A hostile client against the built `sandpit serve`: results that print a megabyte per stream,
 * a flood of MCP sessions from one token, and a flood of requests. Each test measures the
 * gateway's RSS (/proc/PID/status) and GET /health latency while the attack runs, against bounds
 * written here. The /health bounds are for an idle machine, stretched by how slow host commands
 * run right now (test/support/timing.ts, at most 5×): other work on the two cores delays /health
 * as much as the attack would.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { requireDocker } from '../support/docker.js';
import { hostStretch } from '../support/timing.js';
import { callTool, connectHttp, ensureBuilt, startServe, type Served } from './helpers.js';
import { MCP_ACCEPT, rawInitialize } from '../support/mcp-raw.js';

const MiB = 1024 ** 2;
const ALICE = 'alice-token-0123456789';
const BOB = 'bob-token-0123456789';
const TOKENS = [
  { name: 'alice', token: ALICE },
  { name: 'bob', token: BOB },
];
const INIT = rawInitialize('flood');

function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line?.split(/\s+/)[1] ?? NaN) / 1024;
}

function post(url: string, body: unknown, headers: Record<string, string>): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      ...MCP_ACCEPT,
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** /health, one request after another, until `work` settles: each latency in ms. */
async function healthDuring<T>(url: string, work: Promise<T>): Promise<{ value: T; latencies: number[] }> {
  let done = false;
  const settled = work.finally(() => (done = true));
  const latencies: number[] = [];
  while (!done) {
    const t0 = performance.now();
    const res = await fetch(`${url}/health`);
    await res.body?.cancel();
    latencies.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { value: await settled, latencies };
}

const percentile = (xs: number[], p: number): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};

/** Runs `n` tasks, `width` at a time. */
async function inParallel(n: number, width: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

/**
 * The lowest RSS over the second half of `n` runs, four at a time: the gateway's floor, between
 * its collections. At any one moment it also holds the garbage of the runs just done (each
 * result's megabytes in several copies) until V8's next major collection: read at once after the
 * runs, that put the growth anywhere from 20 to 131 MiB.
 */
async function rssFloorOver(pid: number, n: number, run: () => Promise<void>): Promise<number> {
  let done = 0;
  let floor = Infinity;
  const timer = setInterval(() => {
    if (done >= n / 2) floor = Math.min(floor, rssMiB(pid));
  }, 200);
  try {
    await inParallel(n, 4, async () => {
      await run();
      done++;
    });
  } finally {
    clearInterval(timer);
  }
  return Math.min(floor, rssMiB(pid));
}

/**
 * The attacker in a process of its own, as a real one would be: `n` POSTs to /mcp, `width` at a
 * time, each `body` with its id set to `idBase + i`. The test's own process only probes /health,
 * so its latencies are the gateway's, not those of a client busy flooding.
 */
const FLOOD_SCRIPT = `
const { url, n, width, body, idBase, headers } = JSON.parse(process.argv[1]);
const out = [];
let next = 0;
await Promise.all(Array.from({ length: width }, async () => {
  while (next < n) {
    const i = next++;
    const res = await fetch(url + '/mcp', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify({ ...body, id: idBase + i }),
    });
    await res.body?.cancel();
    out[i] = { status: res.status, sessionId: res.headers.get('mcp-session-id') ?? '' };
  }
}));
process.stdout.write(JSON.stringify(out));
`;

function floodInChild(options: {
  url: string;
  n: number;
  width: number;
  body: object;
  idBase: number;
  headers: Record<string, string>;
}): Promise<{ status: number; sessionId: string }[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        FLOOD_SCRIPT,
        JSON.stringify({ ...options, headers: { ...MCP_ACCEPT, ...options.headers } }),
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`the flooding process exited with ${code}`));
      resolve(JSON.parse(out) as { status: number; sessionId: string }[]);
    });
  });
}

describe('sandpit serve under a hostile client (built CLI)', () => {
  before(async () => {
    ensureBuilt();
    await requireDocker();
  });

  describe('results of a megabyte per stream, 150 of them', () => {
    let served: Served;
    before(async () => {
      served = await startServe({ auth: { tokens: TOKENS }, logging: { level: 'warn' } });
    });
    after(() => served.stop());

    test('the history stays within its budget: RSS grows by less than 128 MiB; /health p50 < 500 ms', async () => {
      const client = await connectHttp(`${served.url}/mcp`, ALICE);
      const code = 'import sys\nsys.stdout.write("o" * (1 << 20))\nsys.stderr.write("e" * (1 << 20))';
      const run = async (): Promise<void> => {
        const r = await callTool(client.client, 'run_code', { code });
        const s = r.structuredContent as { stdoutBytes: number; stderrBytes: number; runId: string };
        assert.equal(s.stdoutBytes, MiB);
        assert.equal(s.stderrBytes, MiB);
      };
      const before = await rssFloorOver(served.pid, 20, run); // warm: pools, JIT, buffers
      // How slow the machine is while the runs go on, measured beside them.
      const [{ value: after, latencies }, stretch] = await Promise.all([
        healthDuring(served.url, rssFloorOver(served.pid, 150, run)),
        hostStretch(),
      ]);
      const grown = after - before;
      // The run is still readable, as a tail.
      const last = await callTool(client.client, 'run_code', { code: 'print("last")' });
      const runId = (last.structuredContent as { runId: string }).runId;
      assert.equal((await callTool(client.client, 'get_run', { runId })).isError, undefined);
      await client.close();
      // Before the budget: 150 such results grew a gateway from 100 to 561 MiB. Measured as here
      // (the floor), a gateway whose budget is 2 GiB grew by 220 MiB; this one by -2 to 8.
      assert.ok(grown < 128, `RSS grew by ${grown.toFixed(0)} MiB over 150 runs`);
      // Four runs at once, each returning 2 MiB of output, share the two cores with dockerd: this
      // bound is loose (p90 measured 1.06 s here), and is about the gateway staying up; scaled, as
      // the others in this file, by how slow the machine was meanwhile.
      const p50 = percentile(latencies, 50);
      const bound = 500 * stretch;
      assert.ok(
        p50 < bound,
        `/health p50 ${p50.toFixed(0)} ms (bound ${bound.toFixed(0)} ms on this machine now)`,
      );
    });
  });

  describe('a flood of sessions from one token', () => {
    let served: Served;
    before(async () => {
      served = await startServe({
        auth: { tokens: TOKENS },
        // The rate limit is not what this test is about: let the flood through it.
        server: { maxRequestsPerSecond: 10_000, unusedSessionSeconds: 3 },
        logging: { level: 'warn' },
      });
    });
    after(() => served.stop());

    test('300 initializes from alice: bob keeps his session and opens more; RSS < +64 MiB; /health p90 < 100 ms', async () => {
      const bob = await connectHttp(`${served.url}/mcp`, BOB);
      await bob.client.listTools(); // a session that is in use
      const before = rssMiB(served.pid);
      const flood = floodInChild({
        url: served.url,
        n: 300,
        width: 8,
        body: INIT,
        idBase: 1,
        headers: bearer(ALICE),
      });
      const { value: answers, latencies } = await healthDuring(served.url, flood);
      const grown = rssMiB(served.pid) - before;
      for (const a of answers) assert.equal(a.status, 200, `alice's initialize got ${a.status}`);
      const ids = answers.map((a) => a.sessionId);

      // Bob's session was never anyone's to close, and he can open another one.
      assert.ok((await bob.client.listTools()).tools.length > 0);
      const bob2 = await connectHttp(`${served.url}/mcp`, BOB);
      await bob2.client.ping();
      // Alice lost her own oldest sessions: she holds at most her bound (64).
      const alive = async (id: string): Promise<boolean> => {
        const res = await post(
          served.url,
          { jsonrpc: '2.0', id: 2, method: 'ping' },
          { ...bearer(ALICE), 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' },
        );
        await res.body?.cancel();
        return res.status === 200;
      };
      assert.equal(await alive(ids[0]!), false, 'her first session was closed');
      assert.equal(await alive(ids[ids.length - 1]!), true, 'her newest lives');
      // A session that never made a call goes soon (unusedSessionSeconds: 3).
      const unused = await post(served.url, INIT, bearer(ALICE));
      const unusedId = unused.headers.get('mcp-session-id') ?? '';
      await unused.body?.cancel();
      await new Promise((r) => setTimeout(r, 6000));
      assert.equal(await alive(unusedId), false, 'a never-used session expired');
      await bob.close();
      await bob2.close();
      assert.ok(grown < 64, `RSS grew by ${grown.toFixed(0)} MiB over 300 sessions`);
      const bound = 100 * (await hostStretch());
      const p90 = percentile(latencies, 90);
      assert.ok(
        p90 < bound,
        `/health p90 ${p90.toFixed(0)} ms (bound ${bound.toFixed(0)} ms on this machine now)`,
      );
    });
  });

  describe('a flood of requests from one token', () => {
    let served: Served;
    before(async () => {
      served = await startServe({ auth: { tokens: TOKENS }, logging: { level: 'warn' } });
    });
    after(() => served.stop());

    test('batches are refused; 1000 tools/list calls are limited per token; /health stays under 100 ms', async () => {
      const alice = await connectHttp(`${served.url}/mcp`, ALICE);
      const sessionHeaders = {
        ...bearer(ALICE),
        'mcp-session-id': alice.sessionId ?? '',
        'mcp-protocol-version': '2025-06-18',
      };
      const batch = Array.from({ length: 100 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'tools/list' }));
      const refused = await post(served.url, batch, sessionHeaders);
      assert.equal(refused.status, 400);
      assert.match(JSON.stringify(await refused.json()), /batches are not accepted/);

      const idle = await healthDuring(served.url, new Promise((r) => setTimeout(r, 2000)));
      const before = rssMiB(served.pid);
      const started = performance.now();
      const flood = floodInChild({
        url: served.url,
        n: 1000,
        width: 50,
        body: { jsonrpc: '2.0', method: 'tools/list' },
        idBase: 1000,
        headers: sessionHeaders,
      });
      const { value: answers, latencies } = await healthDuring(served.url, flood);
      const seconds = (performance.now() - started) / 1000;
      const statuses = answers.map((a) => a.status);
      const grown = rssMiB(served.pid) - before;
      // Bob is another principal: alice's flood does not use up his rate.
      const bob = await connectHttp(`${served.url}/mcp`, BOB);
      assert.ok((await bob.client.listTools()).tools.length > 0);
      await bob.close();
      await alice.close();

      const answered = statuses.filter((s) => s === 200).length;
      assert.ok(statuses.includes(429), 'the flood met the rate limit');
      // server.maxRequestsPerSecond, 100: per second of flood, and one window of slack.
      assert.ok(
        answered <= 100 * (Math.ceil(seconds) + 1),
        `${answered} answered in ${seconds.toFixed(1)} s`,
      );
      assert.ok(grown < 64, `RSS grew by ${grown.toFixed(0)} MiB`);
      // Before: 200 small POSTs kept /health waiting 33 s. On two cores shared with the flooding
      // client a single stall is possible (116 ms seen once); 95 of 100 answer under 100 ms.
      const p95 = percentile(latencies, 95);
      const worst = Math.max(...latencies);
      const idleP50 = percentile(idle.latencies, 50).toFixed(1);
      const stretch = await hostStretch();
      assert.ok(
        p95 < 100 * stretch,
        `/health p95 ${p95.toFixed(0)} ms during the flood (idle p50 ${idleP50} ms; bound ${(100 * stretch).toFixed(0)} ms on this machine now)`,
      );
      assert.ok(worst < 250 * stretch, `/health took up to ${worst.toFixed(0)} ms during the flood`);
    });
  });
});
