/**
 * The oci backend (issue 20), in one run: cold `run_code` over MCP HTTP on oci against raw `runc
 * run` of the same bundle, a `runc start` of a container created ahead (what a pre-created pool
 * would leave on the critical path), the Docker backend's cold and warm paths over the same
 * MCP HTTP, and a host spawn of the same python, interleaved round by round. Then sustained
 * throughput on oci with 8 MCP clients for 15 s (and raw runc with 8 loops, the ceiling), and a
 * burst of 100 concurrent calls. Targets: cold p50 <= 1.5x host spawn, >= 40 runs/s sustained,
 * the burst 100% successful (queued, not refused) with p99 under 10 s.
 */
import { spawn } from 'node:child_process';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { loadContext, wireDocker, wireOci } from '../src/cmd/wiring.js';
import type { SandpitService } from '../src/gateway/service.js';
import { makeOciBackend, OCI_LAYOUT } from '../test/support/oci.js';
import { requireDocker } from '../test/support/docker.js';
import { interleaved, percentile, report, target } from './stats.js';
import { runCode, startHttpGateway, type HttpGateway } from './support/mcp-http.js';
import { rawRunc } from './support/raw-runc.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const WARMUP = 3;
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 200);
const CLIENTS = 8;
const SECONDS = 15;
const BURST = 100;
const REQUEST = { template: 'python', code: 'print(1)' };

const HOST = 'host spawn /usr/bin/python3';
const RAW = 'raw runc run (same bundle)';
const PRECREATED = 'raw runc start (created ahead)';
const OCI = 'oci run_code, MCP HTTP';
const DOCKER_COLD = 'docker cold run_code, MCP HTTP';
const DOCKER_WARM = 'docker warm run_code, MCP HTTP';

function hostSpawn(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', ['-c', 'print(1)'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', () => resolve());
  });
}

async function call(client: Client): Promise<void> {
  const r = await runCode(client, REQUEST);
  if (r.stdout !== '1\n') throw new Error(`unexpected result ${JSON.stringify(r)}`);
}

/** A gateway over `service` and one client on it. */
async function gateway(service: SandpitService): Promise<{ gw: HttpGateway; client: Client }> {
  const gw = await startHttpGateway(service);
  return { gw, client: await gw.connect() };
}

const load = async (): Promise<string> =>
  (await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

export default async function bench(): Promise<void> {
  await requireDocker();
  // Room to queue a whole burst: it is to be served, not refused.
  process.env.SANDPIT_SANDBOX_MAX_QUEUED_RUNS = String(BURST * 2);
  const oci = await wireOci(loadContext({ logLevel: 'warn' }), { reaping: false });
  process.env.SANDPIT_POOL_ENABLED = 'false';
  const dockerCold = await wireDocker(loadContext({ logLevel: 'warn' }), { pools: false });
  process.env.SANDPIT_POOL_ENABLED = 'true';
  process.env.SANDPIT_POOL_PREWARM = 'python';
  const dockerWarm = await wireDocker(loadContext({ logLevel: 'warn' }));
  const probe = await makeOciBackend();
  const rootfs = await (
    probe as unknown as { rootfs: { get(i: string): Promise<{ path: string; env: string[] }> } }
  ).rootfs.get('sandpit/python:3.11');
  await probe.close();
  const raw = rawRunc(OCI_LAYOUT, rootfs.path, rootfs.env);
  const gws = {
    oci: await gateway(oci.service),
    cold: await gateway(dockerCold.service),
    warm: await gateway(dockerWarm.service),
  };
  try {
    console.log(`\n# oci bench: load before ${await load()}`);
    let precreated: Awaited<ReturnType<typeof raw.created>> | undefined;
    const samples = await interleaved(
      ROUNDS,
      {
        [HOST]: hostSpawn,
        [RAW]: () => raw.run(),
        [PRECREATED]: {
          prepare: async () => (precreated = await raw.created()),
          run: () => precreated!.start(),
          after: () => precreated!.remove(),
        },
        [OCI]: () => call(gws.oci.client),
        [DOCKER_COLD]: () => call(gws.cold.client),
        [DOCKER_WARM]: () => call(gws.warm.client),
      },
      WARMUP,
      () => new Promise((r) => setTimeout(r, SETTLE_MS)),
    );
    const rows = report(
      'cold python print(1): oci over MCP HTTP vs raw runc, Docker and a host spawn',
      samples,
      HOST,
    );
    const p50 = (name: string): number => rows.find((r) => r.name === name)!.p50;
    target(
      'oci cold p50 <= 1.5x host spawn',
      p50(OCI) <= 1.5 * p50(HOST),
      `${(p50(OCI) / p50(HOST)).toFixed(2)}x (${p50(OCI).toFixed(0)} vs ${p50(HOST).toFixed(0)} ms); raw runc run ${(p50(RAW) / p50(HOST)).toFixed(2)}x; sandpit over raw runc +${(p50(OCI) - p50(RAW)).toFixed(0)} ms`,
    );
    console.log(
      `pre-created pool: runc start alone ${p50(PRECREATED).toFixed(0)} ms vs runc run ${p50(RAW).toFixed(0)} ms p50 ` +
        `(the most a pool could take off the critical path: ${(p50(RAW) - p50(PRECREATED)).toFixed(0)} ms)`,
    );
    console.log(`load after the cold rounds ${await load()}`);

    const rawRate = await raw.perSecond(CLIENTS, SECONDS);
    console.log(
      `raw runc run, ${CLIENTS} loops for ${SECONDS} s: ${rawRate.toFixed(1)} containers/s (load ${await load()})`,
    );
    const sustained = await throughput(gws.oci.gw);
    target(
      `oci sustained >= 40 runs/s (${CLIENTS} MCP clients, ${SECONDS} s)`,
      sustained.rate >= 40,
      `${sustained.rate.toFixed(1)} runs/s, ${sustained.failed} failed; raw runc ${rawRate.toFixed(1)}/s in the same run (load ${await load()})`,
    );
    const burst = await burstOf(await startHttpGateway(oci.service, true));
    target(
      `oci burst of ${BURST}: 100% success, p99 < 10 s`,
      burst.ok === BURST && burst.p99 < 10_000,
      `${burst.ok}/${BURST} succeeded, p50 ${burst.p50.toFixed(0)} ms, p99 ${burst.p99.toFixed(0)} ms${burst.errors.length ? `; errors: ${burst.errors.slice(0, 3).join(' | ')}` : ''} (load ${await load()})`,
    );
  } finally {
    await Promise.all(Object.values(gws).map((g) => g.gw.close()));
    await raw.close();
    await Promise.all([oci.service.shutdown(), dockerCold.service.shutdown(), dockerWarm.service.shutdown()]);
  }
}

async function throughput(gw: HttpGateway): Promise<{ rate: number; failed: number }> {
  const clients = await Promise.all(Array.from({ length: CLIENTS }, () => gw.connect()));
  const end = performance.now() + SECONDS * 1000;
  let ok = 0;
  let failed = 0;
  const t0 = performance.now();
  await Promise.all(
    clients.map(async (client) => {
      while (performance.now() < end) {
        await call(client).then(
          () => ok++,
          () => failed++,
        );
      }
    }),
  );
  return { rate: ok / ((performance.now() - t0) / 1000), failed };
}

/** `BURST` calls at once, over one client of a stateless gateway (each call its own POST). */
async function burstOf(gw: HttpGateway): Promise<{ ok: number; p50: number; p99: number; errors: string[] }> {
  const client = await gw.connect();
  const times: number[] = [];
  const errors: string[] = [];
  await Promise.all(
    Array.from({ length: BURST }, async () => {
      const t0 = performance.now();
      try {
        await call(client);
        times.push(performance.now() - t0);
      } catch (e) {
        errors.push(String(e).slice(0, 200));
      }
    }),
  );
  await gw.close();
  return { ok: times.length, p50: percentile(times, 50), p99: percentile(times, 99), errors };
}
