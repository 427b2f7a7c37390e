/**
 * Soak (issue 21): `sandpit serve` on Docker, with its defaults, given 5 run_code calls a second
 * over MCP Streamable HTTP for SANDPIT_SOAK_SECONDS (600 by default). Its RSS at the end (minute
 * 10) is at most 1.15× its RSS at a fifth of the way (minute 2), each the peak of the minute before
 * (see steady()), its open descriptors stay within ±10, every call finishes with its own output or
 * is refused with the busy error (the gateway's backpressure: a cold container costs about 0.4 s of
 * the 2 cores' time), and p50, p99, the busy refusals and the errors are reported.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import { percentile } from '../../bench/stats.js';
import {
  callTool,
  connectHttp,
  containersOfPid,
  ensureBuilt,
  startServe,
  textOf,
  type Served,
} from '../e2e/helpers.js';
import { requireDocker } from '../support/docker.js';
import { recordFigure } from '../support/figures.js';
import { openFds, rssBytes } from '../support/process-stats.js';

const TOKEN = 'load-soak-token-0123';
const SECONDS = Number(process.env.SANDPIT_SOAK_SECONDS ?? 600);
const PER_SECOND = 5;

let docker: Docker;
let served: Served;

/**
 * `pid`'s RSS over `ms` (sampled every 250 ms) as the most it held, and its open descriptors as
 * their median. One sample is at the mercy of the GC and of the calls in flight; and V8 gives back
 * up to 24 MB of its young generation for tens of seconds whenever the allocation rate dips (a
 * soak's RSS fell from 149 MB to 119 MB just before minute 2, and was 146 MB again 40 s later),
 * so the RSS a window compares is its peak, which such a dip does not lower and a leak raises.
 */
async function steady(pid: number, ms: number): Promise<{ rss: number; fds: number }> {
  const rss: number[] = [];
  const fds: number[] = [];
  for (const end = performance.now() + ms; performance.now() < end;) {
    rss.push(rssBytes(pid));
    fds.push(openFds(pid));
    await new Promise((r) => setTimeout(r, 250));
  }
  return { rss: Math.max(...rss), fds: percentile(fds, 50) };
}

/** Whether a call was refused with the busy error: as a tool error, or, past the request rate limit, a 429 the client raises. */
const isBusy = (text: string): boolean => /^BUSY: /.test(text) || /"code":"BUSY"/.test(text);

const MB = (bytes: number): number => Math.round((bytes / 1024 ** 2) * 10) / 10;

describe(
  `load: a soak of ${PER_SECOND} runs/s for ${SECONDS} s (docker)`,
  { timeout: (SECONDS + 600) * 1000 },
  () => {
    before(async () => {
      assert.ok(SECONDS >= 30, `SANDPIT_SOAK_SECONDS must be at least 30 (${SECONDS})`);
      docker = await requireDocker();
      ensureBuilt();
      served = await startServe({ auth: { token: TOKEN } });
    });
    after(async () => {
      if (!served) return;
      assert.equal(await served.stop(), 0);
      assert.deepEqual(await containersOfPid(docker, served.pid), [], 'no container is left');
    });

    test('RSS at the end ≤ 1.15× RSS at a fifth; descriptors ±10; every call finishes or is refused busy', async (t) => {
      const c = await connectHttp(`${served.url}/mcp`, TOKEN);
      const latencies: number[] = [];
      const errors: string[] = [];
      let busy = 0;
      const calls: Promise<void>[] = [];
      let early: Promise<{ rss: number; fds: number }> | undefined;
      let late: Promise<{ rss: number; fds: number }> | undefined;
      // The minute before each point (a tenth of the soak).
      const window = (SECONDS * 1000) / 10;
      const t0 = performance.now();
      try {
        for (let i = 0; i < SECONDS * PER_SECOND; i++) {
          // Calls start on a fixed schedule, whether or not earlier ones have finished.
          const due = t0 + (i * 1000) / PER_SECOND;
          await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
          const started = performance.now();
          calls.push(
            callTool(c.client, 'run_code', { code: `print(${i} + 1)` }).then(
              (r) => {
                if (r.isError && isBusy(textOf(r))) busy++;
                else if (r.isError || r.structuredContent?.stdout !== `${i + 1}\n`)
                  errors.push(`call ${i}: ${textOf(r)}`);
                else latencies.push(performance.now() - started);
              },
              (e: unknown) => {
                if (isBusy(String(e))) busy++;
                else errors.push(`call ${i}: ${String(e)}`);
              },
            ),
          );
          // The figures of the window before a fifth of the way (minute 2 of 10), and of the last
          // one, taken without pausing the calls.
          const elapsed = performance.now() - t0;
          if (!early && elapsed >= (SECONDS * 1000) / 5 - window) early = steady(served.pid, window);
          if (!late && elapsed >= SECONDS * 1000 - window) late = steady(served.pid, window);
        }
        assert.ok(early && late);
        const [first, last] = [await early, await late];
        await Promise.all(calls);

        recordFigure(t, { name: 'calls', value: calls.length, unit: 'calls' });
        recordFigure(t, { name: 'finished', value: latencies.length, unit: 'calls' });
        recordFigure(t, { name: 'busy', value: busy, unit: 'calls' });
        recordFigure(t, { name: 'errors', value: errors.length, unit: 'calls' });
        recordFigure(t, { name: 'p50', value: Math.round(percentile(latencies, 50)), unit: 'ms' });
        recordFigure(t, { name: 'p99', value: Math.round(percentile(latencies, 99)), unit: 'ms' });
        recordFigure(t, {
          name: 'RSS at a fifth (peak of the minute before)',
          value: MB(first.rss),
          unit: 'MB',
        });
        recordFigure(t, {
          name: 'RSS at the end (peak of the last minute)',
          value: MB(last.rss),
          unit: 'MB',
          bound: '≤ 1.15× at a fifth',
        });
        recordFigure(t, {
          name: 'descriptors, end − fifth',
          value: last.fds - first.fds,
          unit: 'fds',
          bound: '±10',
        });
        assert.deepEqual(errors.slice(0, 5), [], `${errors.length} calls failed`);
        assert.equal(latencies.length + busy, calls.length, 'every call is answered');
        assert.ok(last.rss <= 1.15 * first.rss, `RSS grew from ${MB(first.rss)} MB to ${MB(last.rss)} MB`);
        assert.ok(Math.abs(last.fds - first.fds) <= 10, `descriptors went from ${first.fds} to ${last.fds}`);
      } finally {
        await c.close();
      }
    });
  },
);
