/**
 * Opening the upstream side of one connection: the allowlist decides the name or address, the
 * proxy resolves a name itself (once), drops every address the SSRF floor refuses, and dials the
 * addresses that passed, in order, within the connect timeout. What it dials is exactly what it
 * checked: nothing downstream resolves again. The resolver and the dialer are injected (tests
 * give one that fails on any address off loopback).
 */
import { lookup } from 'node:dns/promises';
import { connect, type Socket } from 'node:net';
import type { EffectiveNetwork } from '../api/egress.js';
import { formatIp, parseIp, unmapIp, type IpAddress } from '../shared/ip.js';
import { decideAddress, decideTarget, type DenyReason, type Target } from './decide.js';
import type { Floor } from './floor.js';

/** A name's addresses, as the proxy's resolver gives them. */
export type Resolver = (host: string) => Promise<IpAddress[]>;
/**
 * Takes what a tunnel's upstream socket reads, in place of its 'data' events; false pauses the
 * socket (the caller resumes it).
 */
export type Reader = (chunk: Buffer) => boolean;
/**
 * A socket connecting to exactly this address and port (net.connect by default). With a reader,
 * what the socket reads goes to it (a tunnel's), not to 'data' events (a plain-HTTP request's).
 */
export type Dialer = (address: IpAddress, port: number, reader?: Reader) => Socket;

/**
 * A tunnel reads its upstream into fresh buffers this large, handed on without a copy: with
 * 'data' events of 64 KiB a proxy on two cores moves a third of what a direct reader does;
 * this way about what socat does (bench/egress.bench.ts).
 */
const READ_BYTES = 256 * 1024;

export const systemResolver: Resolver = async (host) => {
  const found = await lookup(host, { all: true, verbatim: true });
  return found.map((a) => parseIp(a.address)).filter((ip) => ip !== undefined);
};

export const systemDialer: Dialer = (address, port, reader) =>
  connect({
    host: formatIp(address),
    port,
    family: address.family,
    noDelay: true,
    ...(reader
      ? {
          onread: {
            buffer: () => Buffer.allocUnsafe(READ_BYTES),
            callback: (n: number, buf: Uint8Array) => reader(Buffer.from(buf.buffer, buf.byteOffset, n)),
          },
        }
      : {}),
  });

export interface UpstreamDeps {
  floor: Floor;
  resolve: Resolver;
  dial: Dialer;
  connectTimeoutMs: number;
}

/** Connected: the socket and the address it reached. Refused by policy, or failed upstream after it allowed. */
export type Upstream =
  | { kind: 'open'; socket: Socket; address: IpAddress; rule: string }
  | { kind: 'denied'; reason: DenyReason; rule: string }
  | { kind: 'failed'; rule: string; error: string; status: 502 | 504; address?: IpAddress };

/** Opens the upstream of one connection; a tunnel gives the `reader` its socket's reads go to. */
export async function openUpstream(
  network: EffectiveNetwork,
  target: Target,
  deps: UpstreamDeps,
  reader?: Reader,
): Promise<Upstream> {
  const verdict = decideTarget(network, target);
  if (!verdict.allowed) return { kind: 'denied', reason: verdict.reason, rule: verdict.rule };
  const deadline = Date.now() + deps.connectTimeoutMs;
  let addresses: IpAddress[];
  try {
    addresses = target.kind === 'address' ? [target.ip] : await resolveWithin(deps, target.host, deadline);
  } catch (e) {
    return {
      kind: 'failed',
      rule: verdict.rule,
      error: `cannot resolve ${target.kind === 'name' ? target.host : '?'}: ${message(e)}`,
      status: 502,
    };
  }
  const candidates: IpAddress[] = [];
  let floorRule: string | undefined;
  for (const ip of unique(addresses.map(unmapIp))) {
    const passed = decideAddress(network, deps.floor, ip);
    if (passed.allowed) candidates.push(ip);
    else floorRule ??= passed.rule;
  }
  if (candidates.length === 0) {
    return floorRule
      ? { kind: 'denied', reason: 'floor', rule: floorRule }
      : { kind: 'failed', rule: verdict.rule, error: 'the name has no address', status: 502 };
  }
  return dialFirst({ candidates, port: target.port, rule: verdict.rule, deadline, reader }, deps);
}

async function resolveWithin(deps: UpstreamDeps, host: string, deadline: number): Promise<IpAddress[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([deps.resolve(host), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function dialFirst(
  {
    candidates,
    port,
    rule,
    deadline,
    reader,
  }: { candidates: IpAddress[]; port: number; rule: string; deadline: number; reader: Reader | undefined },
  deps: UpstreamDeps,
): Promise<Upstream> {
  let last: { error: string; address: IpAddress } | undefined;
  for (const address of candidates) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    const socket = deps.dial(address, port, reader);
    const outcome = await dialOne(socket, left);
    if (outcome === 'connected') return { kind: 'open', socket, address, rule };
    last = { error: outcome, address };
    if (outcome === 'timeout') break;
  }
  const timedOut = !last || last.error === 'timeout';
  return {
    kind: 'failed',
    rule,
    status: timedOut ? 504 : 502,
    error: timedOut
      ? `no connection within ${Math.round(deps.connectTimeoutMs / 1000)} s (sandbox.egress.connectTimeoutSeconds)`
      : `connect failed: ${last!.error}`,
    ...(last ? { address: last.address } : {}),
  };
}

/** 'connected', 'timeout', or the error's code or message; the socket is destroyed unless connected. */
function dialOne(socket: Socket, ms: number): Promise<string> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => done('timeout'), ms);
    const onConnect = (): void => done('connected');
    const onError = (e: NodeJS.ErrnoException): void => done(e.code ?? e.message);
    function done(result: string): void {
      clearTimeout(timer);
      socket.off('connect', onConnect).off('error', onError);
      if (result !== 'connected') socket.destroy();
      resolve(result);
    }
    socket.once('connect', onConnect).once('error', onError);
  });
}

function unique(ips: IpAddress[]): IpAddress[] {
  const seen = new Set<string>();
  return ips.filter((ip) => {
    const key = `${ip.family}:${ip.value}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function message(e: unknown): string {
  return (e as NodeJS.ErrnoException).code ?? (e as Error).message;
}
