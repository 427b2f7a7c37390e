/**
 * MCP overhead: run_code over MCP against the raw `service.run()` of the same request, interleaved
 * in one run. The MCP paths are the built CLI as users run it: `sandpit mcp` over stdio and
 * `sandpit serve` (stateful and stateless) over Streamable HTTP on 127.0.0.1, each its own process
 * with its own warm pool, like the raw path's service in this process.
 *
 * Each call is timed after a pause (BENCH_SETTLE_MS, default 500: an agent's think time), so that
 * the pools' refills of the previous calls are not measured as overhead of this one: on a 2-core
 * machine a container start competes for the CPU with everything else. Three tables: end-to-end,
 * the time outside the run (end-to-end minus the run's durationMs), and a get_run right after the
 * run (the transport's round trip alone, while the pool replaces the container just used). A
 * fourth table times a bare echo process (no MCP) after the same pause: on a VM, waking a second
 * process after an idle pause costs milliseconds by itself, and the MCP paths pay it, the
 * in-process raw path does not. Target: at most 10 ms of p50 overhead.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { loadContext, wireDocker } from '../src/cmd/wiring.js';
import { LOCAL_PRINCIPAL } from '../src/gateway/principal.js';
import { cleanEnv, connectHttp, connectStdio, ensureBuilt, startServe } from '../test/e2e/helpers.js';
import { requireDocker } from '../test/support/docker.js';
import { interleaved, report, target } from './stats.js';
import { startEcho } from './support/echo.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 60);
const WARMUP = 5;
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 500);
const REQUEST = { template: 'python', code: 'print(1)' };
const QUIET = { logging: { level: 'warn' } };
const RAW = 'raw service.run()';
const STDIO = 'MCP stdio (sandpit mcp)';
const STATEFUL = 'MCP HTTP stateful (sandpit serve)';
const STATELESS = 'MCP HTTP stateless (sandpit serve)';
const BARE_STDIO = 'bare stdio echo (no MCP)';
const BARE_HTTP = 'bare HTTP echo on 127.0.0.1 (no MCP)';

function check(stdout: unknown): void {
  if (stdout !== '1\n') throw new Error(`unexpected output ${JSON.stringify(stdout)}`);
}

/**
 * Per call: end-to-end time; the time outside the run itself (end-to-end minus the run's own
 * `durationMs`), which is less sensitive to how long each container happened to take; and, right
 * after it, one `get_run` of that run: the transport's own round trip, with the processes awake.
 */
const endToEnd: Record<string, number[]> = {};
const outside: Record<string, number[]> = {};
const roundTrip: Record<string, number[]> = {};
/** A bare round trip to a second process after the same pause: the machine's wake-up cost. */
const bare: Record<string, number[]> = {};

const bareTimed = (name: string, roundTripOnce: () => Promise<void>) => async (): Promise<void> => {
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const t0 = performance.now();
  await roundTripOnce();
  (bare[name] ??= []).push(performance.now() - t0);
};

interface Path {
  run(): Promise<{ runId: string; durationMs: number }>;
  get(runId: string): Promise<unknown>;
}

const timed = (name: string, path: Path) => async (): Promise<void> => {
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const t0 = performance.now();
  const { runId, durationMs } = await path.run();
  const ms = performance.now() - t0;
  const t1 = performance.now();
  await path.get(runId);
  (roundTrip[name] ??= []).push(performance.now() - t1);
  (endToEnd[name] ??= []).push(ms);
  (outside[name] ??= []).push(ms - durationMs);
};

const measured = (samples: Record<string, number[]>) =>
  Object.entries(samples).map(([name, s]) => ({ name, samples: s.slice(WARMUP) }));

const viaMcp = (client: Client): Path => ({
  async run() {
    const r = (await client.callTool({ name: 'run_code', arguments: REQUEST })) as CallToolResult;
    check(r.structuredContent?.stdout);
    return r.structuredContent as { runId: string; durationMs: number };
  },
  get: (runId) => client.callTool({ name: 'get_run', arguments: { runId } }),
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
  const echo = await startEcho();
  try {
    await interleaved(
      ROUNDS,
      {
        [RAW]: timed(RAW, {
          async run() {
            const r = await service.runs.run(REQUEST, LOCAL_PRINCIPAL);
            check(r.stdout);
            return r;
          },
          get: (runId) => service.runs.get(runId, LOCAL_PRINCIPAL),
        }),
        [STDIO]: timed(STDIO, viaMcp(stdio.client)),
        [STATEFUL]: timed(STATEFUL, viaMcp(stateful.client)),
        [STATELESS]: timed(STATELESS, viaMcp(stateless.client)),
        [BARE_STDIO]: bareTimed(BARE_STDIO, echo.stdio),
        [BARE_HTTP]: bareTimed(BARE_HTTP, echo.http),
      },
      WARMUP,
    );
    const rows = report('run_code over MCP vs raw service.run() (python print(1))', measured(endToEnd), RAW);
    const out = report(
      "time outside the run: end-to-end minus the run's own durationMs",
      measured(outside),
      RAW,
    );
    report('get_run right after: the round trip alone, processes awake', measured(roundTrip), RAW);
    const wake = report(
      `no MCP at all: a bare round trip to a second process after the same ${SETTLE_MS} ms pause`,
      measured(bare),
      BARE_STDIO,
    );
    const wakeOf = (name: string) => wake.find((w) => w.name === (name === STDIO ? BARE_STDIO : BARE_HTTP))!;
    for (let i = 1; i < rows.length; i++) {
      const row = rows[i]!;
      const overhead = row.p50 - rows[0]!.p50;
      const outsideDelta = out[i]!.p50 - out[0]!.p50;
      target(
        `${row.name}: p50 overhead <= 10 ms`,
        overhead <= 10,
        `${overhead.toFixed(1)} ms end-to-end (${row.p50.toFixed(1)} vs ${rows[0]!.p50.toFixed(1)} ms, ` +
          `${(row.p50 / rows[0]!.p50).toFixed(2)}x); outside the run ${outsideDelta.toFixed(1)} ms more than raw; ` +
          `a ${wakeOf(row.name).name} after the same pause takes ${wakeOf(row.name).p50.toFixed(1)} ms by itself`,
      );
    }
  } finally {
    await Promise.all([stdio.close(), stateful.close(), stateless.close(), echo.close()]);
    await Promise.all([statefulServer.stop(), statelessServer.stop()]);
    await service.shutdown();
  }
}
