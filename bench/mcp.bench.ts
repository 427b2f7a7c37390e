/**
 * MCP overhead: run_code over MCP against the raw `service.run()` of the same request, interleaved
 * in one run. The MCP paths are the built CLI as users run it: `sandpit mcp` over stdio and
 * `sandpit serve` (stateful and stateless) over Streamable HTTP on 127.0.0.1, each its own process
 * with its own warm pool, like the raw path's service in this process.
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
const REQUEST = { template: 'python', code: 'print(1)' };
const QUIET = { logging: { level: 'warn' } };

function check(stdout: unknown): void {
  if (stdout !== '1\n') throw new Error(`unexpected output ${JSON.stringify(stdout)}`);
}

const viaMcp = (client: Client) => async (): Promise<void> => {
  const r = (await client.callTool({ name: 'run_code', arguments: REQUEST })) as CallToolResult;
  check(r.structuredContent?.stdout);
};

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
    const series = await interleaved(
      ROUNDS,
      {
        'raw service.run()': async () => check((await service.run(REQUEST, LOCAL_PRINCIPAL)).stdout),
        'MCP stdio (sandpit mcp)': viaMcp(stdio.client),
        'MCP HTTP stateful (sandpit serve)': viaMcp(stateful.client),
        'MCP HTTP stateless (sandpit serve)': viaMcp(stateless.client),
      },
      5,
    );
    const rows = report(
      'run_code over MCP vs raw service.run() (python print(1))',
      series,
      'raw service.run()',
    );
    const raw = rows[0]!.p50;
    for (const row of rows.slice(1)) {
      const overhead = row.p50 - raw;
      target(
        `${row.name}: p50 overhead <= 10 ms`,
        overhead <= 10,
        `${overhead.toFixed(1)} ms (${row.p50.toFixed(1)} vs ${raw.toFixed(1)} ms, ${(row.p50 / raw).toFixed(2)}x)`,
      );
    }
  } finally {
    await Promise.all([stdio.close(), stateful.close(), stateless.close()]);
    await Promise.all([statefulServer.stop(), statelessServer.stop()]);
    await service.shutdown();
  }
}
