/**
 * MCP overhead: run_code over MCP against the raw `service.run()` of the same request, interleaved
 * in one run. The MCP paths are the built CLI as users run it: `sandpit mcp` over stdio and
 * `sandpit serve` (stateful and stateless) over Streamable HTTP on 127.0.0.1, each its own process
 * with its own warm pool, like the raw path's service in this process.
 *
 * Each call is timed after a short pause (BENCH_SETTLE_MS, default 500), so that the pools' refills
 * of the previous calls are not measured as overhead of this one: on a 2-core machine a container
 * start competes for the CPU with everything else. The series reported are those timings.
 * Target: at most 10 ms of p50 overhead.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { loadContext, wireDocker } from '../src/cmd/context.js';
import { LOCAL_PRINCIPAL } from '../src/gateway/principal.js';
import { cleanEnv, connectHttp, connectStdio, ensureBuilt, startServe } from '../test/e2e/helpers.js';
import { requireDocker } from '../test/support/docker.js';
import { interleaved, report, target } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 60);
const WARMUP = 5;
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 500);
const REQUEST = { template: 'python', code: 'print(1)' };
const QUIET = { logging: { level: 'warn' } };
const RAW = 'raw service.run()';
const STDIO = 'MCP stdio (sandpit mcp)';
const STATEFUL = 'MCP HTTP stateful (sandpit serve)';
const STATELESS = 'MCP HTTP stateless (sandpit serve)';

function check(stdout: unknown): void {
  if (stdout !== '1\n') throw new Error(`unexpected output ${JSON.stringify(stdout)}`);
}

/**
 * Per call: end-to-end time, and the time outside the run itself (end-to-end minus the run's own
 * `durationMs`), which is less sensitive to how long each container happened to take.
 */
const endToEnd: Record<string, number[]> = {};
const outside: Record<string, number[]> = {};
async function timed(name: string, call: () => Promise<{ durationMs: number }>): Promise<void> {
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const t0 = performance.now();
  const { durationMs } = await call();
  const ms = performance.now() - t0;
  (endToEnd[name] ??= []).push(ms);
  (outside[name] ??= []).push(ms - durationMs);
}

const measured = (samples: Record<string, number[]>) =>
  Object.entries(samples).map(([name, s]) => ({ name, samples: s.slice(WARMUP) }));

const viaMcp = (name: string, client: Client) => (): Promise<void> =>
  timed(name, async () => {
    const r = (await client.callTool({ name: 'run_code', arguments: REQUEST })) as CallToolResult;
    check(r.structuredContent?.stdout);
    return { durationMs: r.structuredContent?.durationMs as number };
  });

export default async function bench(): Promise<void> {
  await requireDocker();
  ensureBuilt();
  const { service } = await wireDocker(loadContext({ logLevel: 'warn' }));
  const stdio = await connectStdio({ env: cleanEnv({ SANDPIT_LOGGING_LEVEL: 'warn' }) });
  const statefulServer = await startServe(QUIET);
  const statelessServer = await startServe(QUIET, ['--stateless']);
  const stateful = await connectHttp(`${statefulServer.url}/mcp`);
  const stateless = await connectHttp(`${statelessServer.url}/mcp`);
  try {
    await interleaved(
      ROUNDS,
      {
        [RAW]: () =>
          timed(RAW, async () => {
            const r = await service.run(REQUEST, LOCAL_PRINCIPAL);
            check(r.stdout);
            return r;
          }),
        [STDIO]: viaMcp(STDIO, stdio.client),
        [STATEFUL]: viaMcp(STATEFUL, stateful.client),
        [STATELESS]: viaMcp(STATELESS, stateless.client),
      },
      WARMUP,
    );
    const rows = report('run_code over MCP vs raw service.run() (python print(1))', measured(endToEnd), RAW);
    const out = report(
      "time outside the run: end-to-end minus the run's own durationMs",
      measured(outside),
      RAW,
    );
    for (let i = 1; i < rows.length; i++) {
      const row = rows[i]!;
      const overhead = row.p50 - rows[0]!.p50;
      const outsideDelta = out[i]!.p50 - out[0]!.p50;
      target(
        `${row.name}: p50 overhead <= 10 ms`,
        overhead <= 10,
        `${overhead.toFixed(1)} ms end-to-end (${row.p50.toFixed(1)} vs ${rows[0]!.p50.toFixed(1)} ms, ` +
          `${(row.p50 / rows[0]!.p50).toFixed(2)}x); outside the run ${outsideDelta.toFixed(1)} ms more than raw`,
      );
    }
  } finally {
    await Promise.all([stdio.close(), stateful.close(), stateless.close()]);
    await Promise.all([statefulServer.stop(), statelessServer.stop()]);
    await service.shutdown();
  }
}
