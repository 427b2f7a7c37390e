/**
 * 20 concurrent run_code calls against a server that admits 3 at a time with a queue of 4: each
 * call completes with its own correct output or gets the busy error; none is lost, the queue stays
 * bounded, and no container is left behind.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type Docker from 'dockerode';
import { requireDocker } from '../support/docker.js';
import {
  callTool,
  connectHttp,
  connectStdio,
  containersOfPid,
  ensureBuilt,
  startServe,
  textOf,
  waitFor,
  waitRunsGone,
  type Connected,
  type Served,
} from './helpers.js';

const TOKEN = 'concurrency-token-0123';
const CALLS = 20;

let docker: Docker;
let served: Served;

before(async () => {
  docker = await requireDocker();
  ensureBuilt();
  served = await startServe({ auth: { token: TOKEN }, sandbox: { maxConcurrentRuns: 3, maxQueuedRuns: 4 } });
});
after(async () => {
  if (!served) return;
  assert.equal(await served.stop(), 0);
  assert.deepEqual(await containersOfPid(docker, served.pid), []);
});

async function burst(c: Connected): Promise<{ ok: number; busy: number }> {
  const results = await Promise.all(
    Array.from({ length: CALLS }, (_, i) =>
      callTool(c.client, 'run_code', { code: `import time\ntime.sleep(0.5)\nprint(${i} * 7)` }).then((r) => ({
        i,
        r,
      })),
    ),
  );
  let ok = 0;
  let busy = 0;
  const runIds: string[] = [];
  for (const { i, r } of results) {
    if (r.isError) {
      assert.match(textOf(r), /^BUSY: busy, retry later: /, `call ${i}: ${textOf(r)}`);
      assert.match(textOf(r), /retryable: yes/);
      busy++;
    } else {
      assert.equal(r.structuredContent?.phase, 'Succeeded', `call ${i}`);
      assert.equal(r.structuredContent?.stdout, `${i * 7}\n`, `call ${i} got its own output`);
      runIds.push(r.structuredContent?.runId as string);
      ok++;
    }
  }
  assert.equal(ok + busy, CALLS, 'no call was lost');
  assert.equal(new Set(runIds).size, runIds.length, 'every run has its own id');
  await waitRunsGone(docker, runIds);
  return { ok, busy };
}

test('20 concurrent calls over Streamable HTTP: each completes correctly or is told to retry', async () => {
  const c = await connectHttp(`${served.url}/mcp`, TOKEN);
  try {
    const { ok, busy } = await burst(c);
    assert.ok(ok >= 7, `at least the admitted and queued calls complete (${ok})`);
    assert.ok(busy >= 1, 'calls beyond the running and queued bound are refused, not queued without limit');
    const health = await callTool(c.client, 'sandbox_health');
    assert.equal(health.structuredContent?.running, 0);
    assert.equal(health.structuredContent?.queued, 0);
  } finally {
    await c.close();
  }
});

test('20 concurrent calls over stdio (default limits): all complete', async () => {
  const c = await connectStdio();
  try {
    const { ok } = await burst(c);
    assert.equal(ok, CALLS);
  } finally {
    const pid = c.pid!;
    await c.close();
    await waitFor('the stdio server to remove its containers', async () =>
      (await containersOfPid(docker, pid)).length === 0 ? true : undefined,
    );
  }
});
