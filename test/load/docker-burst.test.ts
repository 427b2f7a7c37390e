/**
 * Load (issue 21): 100 concurrent run_code calls over MCP Streamable HTTP, from ten MCP clients,
 * against `sandpit serve` with its default limits (8 running, 32 queued) on Docker. Every call finishes with its own output or is refused with the busy error; none is lost; no
 * container is left; the gateway's RSS stays within 150 MB throughout.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { percentile } from '../../bench/stats.js';
import {
  callTool,
  connectHttp,
  containersOfPid,
  ensureBuilt,
  startServe,
  textOf,
  waitRunsGone,
  type Connected,
  type Served,
} from '../e2e/helpers.js';
import { requireDocker } from '../support/docker.js';
import { recordFigure } from '../support/figures.js';
import { sampleRss } from '../support/process-stats.js';

const TOKEN = 'load-burst-token-0123';
const CALLS = 100;
const CLIENTS = 10;
const RSS_BOUND = 150 * 1024 ** 2;

let docker: Docker;
let served: Served;

describe('load: 100 concurrent run_code calls over MCP HTTP (docker)', { timeout: 15 * 60_000 }, () => {
  before(async () => {
    docker = await requireDocker();
    ensureBuilt();
    served = await startServe({ auth: { token: TOKEN } });
  });
  after(async () => {
    if (!served) return;
    assert.equal(await served.stop(), 0);
  });

  test('every call finishes or is told to retry, none is lost, RSS ≤ 150 MB, nothing left', async (t) => {
    const rss = sampleRss(served.pid);
    // Ten MCP clients (a token keeps at most 64 MCP sessions), each making ten of the calls at once.
    const clients: Connected[] = [];
    let settled: PromiseSettledResult<{ i: number; r: CallToolResult; ms: number }>[];
    try {
      const connected = await Promise.allSettled(
        Array.from({ length: CLIENTS }, () => connectHttp(`${served.url}/mcp`, TOKEN)),
      );
      for (const c of connected) if (c.status === 'fulfilled') clients.push(c.value);
      assert.equal(clients.length, CLIENTS, 'every client connects');
      settled = await Promise.allSettled(
        Array.from({ length: CALLS }, async (_, i) => {
          const t0 = performance.now();
          const r = await callTool(clients[i % CLIENTS]!.client, 'run_code', { code: `print(${i} * 7)` });
          return { i, r, ms: performance.now() - t0 };
        }),
      );
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    const peak = rss.stop();

    // A call refused by the request rate limit is answered 429 with the busy error, which the
    // client raises instead of returning.
    const lost = settled.flatMap((s) =>
      s.status === 'rejected' && !/"code":"BUSY"/.test(String(s.reason)) ? [String(s.reason)] : [],
    );
    assert.deepEqual(lost, [], 'no call is lost (each gets a result or the busy error)');
    const done = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const runIds: string[] = [];
    const latencies: number[] = [];
    let busy = settled.length - done.length;
    for (const { i, r, ms } of done) {
      if (r.isError) {
        assert.match(textOf(r), /^BUSY: /, `call ${i}: ${textOf(r)}`);
        busy++;
      } else {
        assert.equal(r.structuredContent?.phase, 'Succeeded', `call ${i}: ${textOf(r)}`);
        assert.equal(r.structuredContent?.stdout, `${i * 7}\n`, `call ${i} got its own output`);
        runIds.push(r.structuredContent?.runId as string);
        latencies.push(ms);
      }
    }
    assert.equal(runIds.length + busy, CALLS);
    assert.equal(new Set(runIds).size, runIds.length, 'every run has its own id');
    assert.ok(runIds.length >= 40, `at least the running and queued calls finish (${runIds.length})`);
    await waitRunsGone(docker, runIds, 60_000);
    recordFigure(t, { name: 'finished', value: runIds.length, unit: 'calls' });
    recordFigure(t, { name: 'busy', value: busy, unit: 'calls' });
    recordFigure(t, { name: 'p50', value: Math.round(percentile(latencies, 50)), unit: 'ms' });
    recordFigure(t, { name: 'p99', value: Math.round(percentile(latencies, 99)), unit: 'ms' });
    recordFigure(t, {
      name: 'gateway RSS peak',
      value: Math.round(peak / 1024 ** 2),
      unit: 'MB',
      bound: '≤ 150 MB',
    });
    assert.ok(peak <= RSS_BOUND, `the gateway's RSS peaked at ${Math.round(peak / 1024 ** 2)} MB`);
    // The run containers are gone; what the server still has is its warm pool, removed when it stops.
    const stopped = await served.stop();
    assert.equal(stopped, 0);
    assert.deepEqual(await containersOfPid(docker, served.pid), [], 'no container is left');
  });
});
