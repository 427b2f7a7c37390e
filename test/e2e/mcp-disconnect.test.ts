/**
 * The disconnect rule (docs/mcp.md), over a TCP proxy on loopback that cuts every connection
 * mid-run. Stateful HTTP: the closed response does not cancel; the SDK client reconnects with
 * Last-Event-ID after the server's retry interval and gets the rest of the output and the result.
 * Stateless HTTP: nothing can resume, so the closed response cancels the run, and its container is
 * gone within 5 s.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { requireDocker } from '../support/docker.js';
import {
  connectHttp,
  containerExists,
  containerRunning,
  cuttableProxy,
  ensureBuilt,
  recordNotifications,
  startServe,
  waitFor,
  type Served,
} from './helpers.js';

const TOKEN = 'disconnect-token-0123456789';

describe('disconnects (built CLI, Docker backend)', () => {
  let docker: Docker;
  before(async () => {
    docker = await requireDocker();
    ensureBuilt();
  });

  describe('stateful: a cut stream resumes with Last-Event-ID and gets the result', () => {
    let served: Served;
    before(async () => {
      served = await startServe({ auth: { token: TOKEN } });
    });
    after(() => served.stop());

    test('the run goes on while the stream is down; the client resumes and gets the output and result', async () => {
      const proxy = await cuttableProxy(Number(new URL(served.url).port));
      const c = await connectHttp(proxy.url, TOKEN);
      try {
        const { notices } = recordNotifications(c.client);
        const call = c.client.callTool(
          {
            name: 'run_code',
            arguments: {
              code: "import time\nprint('before the cut', flush=True)\ntime.sleep(3)\nprint('after the cut', flush=True)",
            },
          },
          undefined,
          { timeout: 60_000 },
        );
        await waitFor(
          'the first output',
          () =>
            notices.some((n) => n.logger === 'stdout' && String(n.data).includes('before the cut')) ||
            undefined,
        );
        const before = proxy.connections();
        proxy.cut();
        const result = (await call) as CallToolResult;
        const r = result.structuredContent as { phase: string; stdout: string };
        assert.equal(r.phase, 'Succeeded', JSON.stringify(result));
        assert.equal(r.stdout, 'before the cut\nafter the cut\n');
        assert.ok(proxy.connections() > before, 'the client reconnected');
        assert.ok(
          notices.some((n) => n.logger === 'stdout' && String(n.data).includes('after the cut')),
          'the output after the cut arrived as notifications too',
        );
      } finally {
        await c.close();
        await proxy.close();
      }
    });
  });

  describe('stateless: a closed response cancels the run', () => {
    let served: Served;
    before(async () => {
      served = await startServe({ auth: { token: TOKEN } }, ['--stateless']);
    });
    after(() => served.stop());

    test('the client goes away mid-run: the run is cancelled and its container gone within 5 s', async () => {
      const proxy = await cuttableProxy(Number(new URL(served.url).port));
      const c = await connectHttp(proxy.url, TOKEN);
      const abort = new AbortController();
      try {
        const marker = `stateless-cut-${Date.now()}`;
        const call = c.client.callTool(
          {
            name: 'run_code',
            arguments: {
              code: `import subprocess\nprint('started', flush=True)\nsubprocess.run(['sh', '-c', 'sleep 60; : "$0"', '${marker}'])`,
            },
          },
          undefined,
          { signal: abort.signal, timeout: 120_000 },
        );
        const settled = call.then(
          () => 'resolved',
          () => 'rejected',
        );
        const container = await waitFor('the container running the program', () =>
          containerRunning(docker, served.pid, marker),
        );
        const t0 = performance.now();
        proxy.cut();
        await waitFor(
          'the container to be removed',
          async () => ((await containerExists(docker, container)) ? undefined : true),
          5_000,
        );
        const seconds = (performance.now() - t0) / 1000;
        assert.ok(seconds < 5, `the container went after ${seconds.toFixed(1)} s`);
        abort.abort();
        assert.equal(await settled, 'rejected', 'the call never got a result');
      } finally {
        abort.abort();
        await c.close();
        await proxy.close();
      }
    });
  });
});
