/**
 * The warm path: run_code over MCP (Streamable HTTP) served from a warm pool, the same call cold,
 * `docker exec` of the same code into a running container, and spawning it on the host, in one
 * interleaved run. Then throughput with 8 concurrent clients and the pool's hit rate under a
 * steady 10 runs/s, next to the engine's own ceiling measured in the same run (raw container runs
 * per second: every sandpit run needs a fresh container). Targets: warm p50 <= 2x host spawn,
 * warm p50 < docker exec, >= 20 runs/s sustained, hit rate >= 95% at 10 runs/s.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type Docker from 'dockerode';
import { loadContext, wireDocker } from '../src/cmd/wiring.js';
import { requireDocker } from '../test/support/docker.js';
import { interleaved, percentile, report, target } from './stats.js';
import { runCode, startHttpGateway, type HttpGateway } from './support/mcp-http.js';
import { rawContainer, rawRunsPerSecond } from './support/raw-engine.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const CODE = 'print(1)';
// Plain runc on every path: the test cluster makes a wrapper the engine's default runtime.
const RUNTIME = process.env.BENCH_RUNTIME ?? 'runc';
const REQUEST = { language: 'python', code: CODE };

function hostSpawn(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', ['-c', CODE], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', () => (out === '1\n' ? resolve() : reject(new Error(`host printed ${out}`))));
  });
}

async function execContainer(docker: Docker): Promise<Docker.Container> {
  const container = await rawContainer(docker, RUNTIME, { Entrypoint: ['sleep', 'infinity'] });
  await container.start();
  return container;
}

async function dockerExec(container: Docker.Container): Promise<void> {
  const exec = await container.exec({ Cmd: ['python3', '-c', CODE], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  await new Promise((r) => stream.on('end', r));
  if (!Buffer.concat(chunks).includes('1\n')) throw new Error('docker exec printed nothing');
}

/** Runs as fast as `clients` callers can for `seconds`; runs/s, hit rate and per-call p50. */
async function closedLoop(gateway: HttpGateway, clients: number, seconds: number) {
  const sessions = await Promise.all(Array.from({ length: clients }, () => gateway.connect()));
  const end = performance.now() + seconds * 1000;
  const latencies: number[] = [];
  let warm = 0;
  await Promise.all(
    sessions.map(async (client) => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const r = await runCode(client, REQUEST);
        latencies.push(performance.now() - t0);
        if (r.served === 'warm') warm++;
      }
    }),
  );
  return {
    rate: latencies.length / seconds,
    hits: warm / latencies.length,
    p50: percentile(latencies, 50),
    n: latencies.length,
  };
}

/** Starts one run every 1/rate seconds for `seconds`, whatever is still running; the share served warm. */
async function openLoop(client: Client, rate: number, seconds: number) {
  const runs: Promise<Record<string, unknown> | undefined>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < rate * seconds; i++) {
    const due = t0 + (i * 1000) / rate;
    await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
    runs.push(runCode(client, REQUEST).catch(() => undefined));
  }
  const results = await Promise.all(runs);
  const refused = results.filter((r) => r === undefined).length;
  return {
    hits: results.filter((r) => r?.served === 'warm').length / results.length,
    n: results.length,
    refused,
  };
}

/**
 * Memory one idle pool container costs the host: what its memory cgroup counts (the runner, page
 * cache, tmpfs) plus the RSS of its containerd shim, which lives outside the cgroup.
 */
function idleContainerMemory(ids: string[]): { cgroup: number; shim: number } {
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const cgroup = ids.map((id) =>
    Number(readFileSync(`/sys/fs/cgroup/memory/docker/${id}/memory.usage_in_bytes`, 'utf8')),
  );
  const shims: number[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const id = argv[argv.indexOf('-id') + 1];
      if (!argv[0]?.includes('containerd-shim') || !id || !ids.includes(id)) continue;
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
      shims.push(Number(rss) * 1024);
    } catch {
      // the process ended while we looked
    }
  }
  return { cgroup: mean(cgroup), shim: mean(shims) };
}

export default async function bench(): Promise<void> {
  const docker = await requireDocker();
  process.env.SANDPIT_SANDBOX_RUNTIME = RUNTIME;
  process.env.SANDPIT_POOL_PREWARM = 'python';
  process.env.SANDPIT_POOL_MIN_IDLE = '4';
  const warmWiring = await wireDocker(loadContext({ logLevel: 'warn' }));
  await warmWiring.backend.pool?.filled(60_000);
  process.env.SANDPIT_POOL_ENABLED = 'false';
  const coldWiring = await wireDocker(loadContext({ logLevel: 'warn' }));
  delete process.env.SANDPIT_POOL_ENABLED;
  const warm = await startHttpGateway(warmWiring.service);
  const cold = await startHttpGateway(coldWiring.service);
  const warmClient = await warm.connect();
  const coldClient = await cold.connect();
  const execTarget = await execContainer(docker);
  try {
    const series = await interleaved(ROUNDS, {
      'host spawn python3': hostSpawn,
      'docker exec into a running container': () => dockerExec(execTarget),
      'run_code over MCP HTTP, warm': async () => {
        const r = await runCode(warmClient, REQUEST);
        if (r.served !== 'warm')
          throw new Error('a warm-path sample was served cold: the pool did not keep up');
      },
      'run_code over MCP HTTP, cold': async () => void (await runCode(coldClient, REQUEST)),
    });
    const rows = report('warm pool: run_code latency (python print(1))', series, 'host spawn python3');
    const [host, exec, warmRow] = [rows[0]!, rows[1]!, rows[2]!];
    target(
      'warm p50 <= 2x host spawn',
      warmRow.p50 <= 2 * host.p50,
      `${(warmRow.p50 / host.p50).toFixed(2)}x (${warmRow.p50.toFixed(1)} vs ${host.p50.toFixed(1)} ms)`,
    );
    target(
      'warm p50 < docker exec',
      warmRow.p50 < exec.p50,
      `${warmRow.p50.toFixed(1)} vs ${exec.p50.toFixed(1)} ms`,
    );

    const ids = (
      await docker.listContainers({
        filters: { label: ['sandpit.dev/kind=pool', `sandpit.dev/owner=${warmWiring.backend.owner}`] },
      })
    ).map((c) => c.Id);
    const memory = idleContainerMemory(ids);
    console.log(
      `memory per idle pool container: ${(memory.cgroup / 1024 ** 2).toFixed(1)} MiB in its cgroup + ` +
        `${(memory.shim / 1024 ** 2).toFixed(1)} MiB containerd shim RSS (mean of ${ids.length})`,
    );

    const seconds = Number(process.env.BENCH_SECONDS ?? 15);
    const tp = await closedLoop(warm, 8, seconds);
    console.log(
      `\n## throughput, 8 concurrent MCP clients for ${seconds} s: ${tp.rate.toFixed(1)} runs/s (${tp.n} runs), ${(tp.hits * 100).toFixed(0)}% warm, per-call p50 ${tp.p50.toFixed(0)} ms`,
    );
    await warmWiring.backend.pool?.filled(60_000);
    const ceiling = await rawRunsPerSecond(docker, RUNTIME, CODE, 8, seconds);
    console.log(
      `## the engine's own ceiling: raw create+start+wait+logs+rm, 8 concurrent loops for ${seconds} s: ${ceiling.toFixed(1)} containers/s`,
    );
    const bound = `the engine alone makes and removes ${ceiling.toFixed(1)} containers/s here, and every run needs one`;
    target('>= 20 runs/s sustained', tp.rate >= 20, `${tp.rate.toFixed(1)} runs/s; ${bound}`);
    const steady = await openLoop(warmClient, 10, seconds);
    console.log(
      `## open loop at 10 runs/s for ${seconds} s: ${(steady.hits * 100).toFixed(1)}% served warm (${steady.n} runs, ${steady.refused} refused busy)`,
    );
    target(
      'hit rate >= 95% at 10 runs/s',
      steady.hits >= 0.95,
      `${(steady.hits * 100).toFixed(1)}%; ${bound}`,
    );
  } finally {
    await execTarget.remove({ force: true });
    await warm.close();
    await cold.close();
    await warmWiring.service.shutdown();
    await coldWiring.service.shutdown();
  }
}
