/**
 * The egress proxy's cost, against going direct on loopback, in the same run (issue 17):
 * 1. a 50 MB download: direct from the upstream, and through a CONNECT tunnel of the proxy, by its
 *    TCP listener (the Kubernetes path) and by a sandbox's Unix socket gate (the Docker path).
 *    Target: throughput through the proxy at least 0.5x direct (p50 of the rounds).
 * 2. 100 small HTTPS-style connections: connect, (CONNECT, 200,) a 517-byte hello, a 1460-byte
 *    reply, close. Target: added latency per connection at most 2 ms (p50 through the proxy minus
 *    p50 direct).
 * The upstream and the proxy are processes of their own, as in production (the proxy in the
 * gateway): everything is on 127.0.0.1 or a Unix socket, and the proxy's dialer refuses anything
 * off loopback.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { interleaved, percentile, report, target } from './stats.js';

const DOWNLOAD_BYTES = Number(process.env.BENCH_EGRESS_DOWNLOAD_BYTES ?? 50 * 1024 ** 2);
const DOWNLOAD_ROUNDS = Number(process.env.BENCH_EGRESS_DOWNLOAD_ROUNDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_EGRESS_CONNECTIONS ?? 100);
const HELLO = Buffer.concat([Buffer.from('HI 517\n'), Buffer.alloc(510, 0x63)]);
const REPLY_BYTES = 1460;

const here = dirname(fileURLToPath(import.meta.url));

/** Starts `bench/support/<name>.ts` with tsx and reads its one line of JSON. */
async function child<T>(name: string, args: string[] = []): Promise<{ info: T; proc: ChildProcess }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', join(here, 'support', `${name}.ts`), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: proc.stdout }), 'line')) as [string];
  return { info: JSON.parse(line) as T, proc };
}

type Door = { port: number; host: string } | { path: string };

async function open(door: Door): Promise<Socket> {
  const socket = 'path' in door ? connect(door.path) : connect({ ...door, noDelay: true });
  await once(socket, 'connect');
  return socket;
}

/** Through the proxy: CONNECT, and the 200 read off before anything else. */
async function tunnel(door: Door, authority: string): Promise<Socket> {
  const socket = await open(door);
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  let head = Buffer.alloc(0);
  while (head.indexOf('\r\n\r\n') < 0) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    head = Buffer.concat([head, chunk]);
  }
  const end = head.indexOf('\r\n\r\n');
  if (!head.subarray(0, 12).toString().startsWith('HTTP/1.1 200'))
    throw new Error(head.subarray(0, end).toString());
  if (head.length > end + 4) socket.unshift(head.subarray(end + 4));
  return socket;
}

/** Reads until `bytes` have come (or the stream ends); returns how many came. */
async function drain(socket: Socket, bytes: number): Promise<number> {
  let got = 0;
  for await (const chunk of socket) {
    got += (chunk as Buffer).length;
    if (got >= bytes) break;
  }
  return got;
}

export default async function egressBench(): Promise<void> {
  const upstream = await child<{ port: number }>('egress-upstream');
  const proxy = await child<{ port: number; socket: string }>('egress-proxy', [String(upstream.info.port)]);
  const authority = `bench.sandpit.test:${upstream.info.port}`;
  const direct: Door = { port: upstream.info.port, host: '127.0.0.1' };
  const viaTcp: Door = { port: proxy.info.port, host: '127.0.0.1' };
  const viaGate: Door = { path: proxy.info.socket };
  try {
    const download = async (socket: Socket): Promise<void> => {
      socket.write(`DL ${DOWNLOAD_BYTES}\n`);
      const got = await drain(socket, DOWNLOAD_BYTES);
      socket.destroy();
      if (got !== DOWNLOAD_BYTES) throw new Error(`downloaded ${got} of ${DOWNLOAD_BYTES} bytes`);
    };
    const downloads = await interleaved(DOWNLOAD_ROUNDS, {
      direct: async () => download(await open(direct)),
      'proxy (TCP, CONNECT)': async () => download(await tunnel(viaTcp, authority)),
      'proxy (socket gate, CONNECT)': async () => download(await tunnel(viaGate, authority)),
    });
    const mb = DOWNLOAD_BYTES / 1024 ** 2;
    report(`egress: ${mb} MB download, ${DOWNLOAD_ROUNDS} rounds`, downloads, 'direct');
    const throughput = Object.fromEntries(
      downloads.map((s) => [s.name, mb / (percentile(s.samples, 50) / 1000)]),
    );
    for (const [name, mbps] of Object.entries(throughput))
      console.log(`${name.padEnd(40)} ${mbps.toFixed(0)} MB/s (p50)`);

    const hello = async (socket: Socket): Promise<void> => {
      socket.write(HELLO);
      const got = await drain(socket, REPLY_BYTES);
      socket.destroy();
      if (got < REPLY_BYTES) throw new Error(`got ${got} of ${REPLY_BYTES} bytes`);
    };
    const small = await interleaved(CONNECTIONS, {
      direct: async () => hello(await open(direct)),
      'proxy (TCP, CONNECT)': async () => hello(await tunnel(viaTcp, authority)),
      'proxy (socket gate, CONNECT)': async () => hello(await tunnel(viaGate, authority)),
    });
    const rows = report(`egress: ${CONNECTIONS} small HTTPS-style connections`, small, 'direct');
    const p50 = (name: string): number => rows.find((r) => r.name === name)!.p50;

    console.log('');
    for (const via of ['proxy (TCP, CONNECT)', 'proxy (socket gate, CONNECT)']) {
      const ratio = throughput[via]! / throughput.direct!;
      target(
        `throughput ${via} >= 0.5x direct`,
        ratio >= 0.5,
        `${throughput[via]!.toFixed(0)} vs ${throughput.direct!.toFixed(0)} MB/s direct = ${ratio.toFixed(2)}x`,
      );
      const added = p50(via) - p50('direct');
      target(
        `added latency per connection ${via} <= 2 ms p50`,
        added <= 2,
        `${p50(via).toFixed(2)} vs ${p50('direct').toFixed(2)} ms direct = +${added.toFixed(2)} ms`,
      );
    }
  } finally {
    proxy.proc.kill();
    upstream.proc.kill();
  }
}
