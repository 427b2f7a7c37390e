/**
 * sandpit's egress proxy (DESIGN.md §6): the one way out of a sandbox that has an allowlist.
 * HTTP CONNECT tunnels and plain-HTTP requests in absolute form, each checked against its
 * sandbox's allowlist, resolved by the proxy itself, held to the SSRF floor, dialed at the address
 * that was checked and spliced; one audit record per connection, limits per sandbox.
 *
 * The proxy listens nowhere itself: a transport hands it each accepted connection with a way to
 * tell whose it is (the Docker backend: the sandbox whose socket it came in on; Kubernetes: the
 * credential and the source pod), asked per request, since an unclaimed pool sandbox becomes a
 * run's when the run claims it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { EgressAuditRecord } from '../api/audit.js';
import type { Logger } from '../observability/logger.js';
import type { EgressMetrics } from '../observability/metrics.js';
import { formatIp, type IpAddress } from '../shared/ip.js';
import { parseAuthority, targetText, type DenyReason, type Target } from './decide.js';
import type { Floor } from './floor.js';
import { parseAbsolute, relay, sameAuthority, type AbsoluteRequest } from './http-forward.js';
import { refuseResponse, refuseSocket, type Refusal } from './refusal.js';
import { createInbound, splice, type Direction, type Inbound, type SpliceEnd } from './splice.js';
import { limitReached, type EgressLimits, type EgressTenant } from './tenant.js';
import {
  openUpstream,
  systemDialer,
  systemResolver,
  type Dialer,
  type Resolver,
  type Upstream,
} from './upstream.js';

/** Whose a request is: a tenant, or a refusal (no egress here, no valid credential). */
export type TenantLookup = { tenant: EgressTenant } | { refused: Refusal & { reason: DenyReason } };

export type TenantOf = (req: IncomingMessage) => TenantLookup;

export interface EgressProxyDeps {
  floor: Floor;
  limits: EgressLimits;
  /** The backend name audit records carry. */
  backend: string;
  audit: (record: EgressAuditRecord) => void;
  resolve?: Resolver;
  dial?: Dialer;
  metrics?: EgressMetrics | undefined;
  logger?: Logger | undefined;
}

export interface EgressProxy {
  /** Serves one accepted connection; `tenantOf` says, per request, whose it is. */
  accept(socket: Socket, tenantOf: TenantOf): void;
  /** Connections open now, tunnels and idle keep-alive ones alike. */
  readonly connections: number;
  /** Ends every connection (tunnels included) and takes no more. */
  close(): void;
}

/** What one connection or request asked for, as the audit record reports it. */
interface Asked {
  method: string;
  host: string;
  port: number;
}

interface Outcome {
  decision: 'allowed' | 'denied';
  reason: DenyReason | 'allowlist';
  rule: string;
  error?: string | undefined;
  address?: IpAddress | undefined;
  bytesOut?: number;
  bytesIn?: number;
}

const HEADERS_TIMEOUT_MS = 30_000;

/** What an admitted request goes on with, or the refusal (with the tenant, when it has one). */
type Admission =
  | { tenant: EgressTenant; target: Target }
  | { tenant?: EgressTenant; refusal: Refusal & { reason: DenyReason } };

const SPLICE_ERRORS: Readonly<Record<SpliceEnd, string | undefined>> = {
  closed: undefined,
  error: undefined,
  idle: 'closed: idle timeout (sandbox.egress.idleTimeoutSeconds)',
  limit: 'closed: byte limit (sandbox.egress.maxBytes)',
};

export function createEgressProxy(deps: EgressProxyDeps): EgressProxy {
  const owners = new WeakMap<Socket, TenantOf>();
  const live = new Set<Socket>();
  const upstreamDeps = {
    floor: deps.floor,
    resolve: deps.resolve ?? systemResolver,
    dial: deps.dial ?? systemDialer,
    connectTimeoutMs: deps.limits.connectTimeoutMs,
  };
  let closed = false;
  const server = createServer({ headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: 0 });

  const lookup = (req: IncomingMessage): TenantLookup => {
    const tenantOf = owners.get(req.socket);
    return tenantOf
      ? tenantOf(req)
      : { refused: { status: 403, reason: 'no-egress', rule: 'this connection belongs to no sandbox' } };
  };

  function finish(tenant: EgressTenant | undefined, asked: Asked, started: number, o: Outcome): void {
    deps.metrics?.connections.inc({ decision: o.decision, reason: o.reason });
    if (!tenant) {
      deps.logger?.debug({ ...asked, rule: o.rule }, 'Refused an egress connection of no sandbox');
      return;
    }
    deps.audit({
      time: new Date().toISOString(),
      event: 'egress',
      principal: tenant.principal,
      backend: deps.backend,
      ...tenant.subject,
      method: asked.method,
      host: asked.host,
      port: asked.port,
      ...(o.address ? { address: formatIp(o.address) } : {}),
      decision: o.decision,
      rule: o.rule,
      ...(o.error ? { error: o.error } : {}),
      bytesOut: o.bytesOut ?? 0,
      bytesIn: o.bytesIn ?? 0,
      durationMs: Date.now() - started,
    });
  }

  const count =
    (tenant: EgressTenant) =>
    (direction: Direction, bytes: number): boolean => {
      tenant.usage.bytes += bytes;
      deps.metrics?.bytes.inc({ direction }, bytes);
      return tenant.usage.bytes <= deps.limits.maxBytes;
    };

  /**
   * The checks before dialing: whose the request is, that it names a valid target (`problem`
   * says what is wrong with it otherwise), and the sandbox's limits.
   */
  function admit(req: IncomingMessage, target: Target | undefined, problem: string | undefined): Admission {
    const who = lookup(req);
    if ('refused' in who) return { refusal: who.refused };
    const { tenant } = who;
    if (problem !== undefined || !target)
      return { tenant, refusal: { status: 400, reason: 'bad-request', rule: problem ?? 'no target' } };
    const limit = limitReached(tenant, deps.limits);
    if (limit) return { tenant, refusal: { status: 429, reason: 'limit', rule: limit } };
    return { tenant, target };
  }

  async function open(tenant: EgressTenant, target: Target, inbound?: Inbound): Promise<Upstream> {
    const began = performance.now();
    tenant.usage.open++;
    deps.metrics?.open.inc();
    const up = await openUpstream(tenant.network, target, upstreamDeps, inbound?.reader);
    if (up.kind === 'open') deps.metrics?.connectDuration.observe((performance.now() - began) / 1000);
    else release(tenant);
    return up;
  }

  function release(tenant: EgressTenant): void {
    tenant.usage.open--;
    deps.metrics?.open.dec();
  }

  function refusalOf(
    up: Exclude<Upstream, { kind: 'open' }>,
  ): Refusal & { reason: DenyReason | 'allowlist' } {
    return up.kind === 'denied'
      ? { status: 403, reason: up.reason, rule: up.rule }
      : { status: up.status, reason: 'allowlist', rule: up.error };
  }

  async function tunnel(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    const started = Date.now();
    client.on('error', () => client.destroy());
    const target = parseAuthority(req.url ?? '');
    const asked = askedOf('CONNECT', target, req.url);
    const problem = target
      ? connectMismatch(req, target)
      : 'CONNECT needs host:port (a host name or an IP address, and a port)';
    const admitted = admit(req, target, problem);
    if ('refusal' in admitted) {
      refuseSocket(client, admitted.refusal);
      return finish(admitted.tenant, asked, started, { decision: 'denied', ...admitted.refusal });
    }
    const { tenant } = admitted;
    const inbound = createInbound();
    const up = await open(tenant, admitted.target, inbound);
    if (up.kind !== 'open') {
      refuseSocket(client, refusalOf(up));
      return finish(tenant, asked, started, outcomeOf(up));
    }
    try {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) up.socket.write(head);
      const result = await splice(
        client,
        { socket: up.socket, inbound },
        {
          idleTimeoutMs: deps.limits.idleTimeoutMs,
          count: count(tenant),
        },
      );
      finish(tenant, asked, started, {
        ...allowed(up),
        bytesOut: result.bytesOut + head.length,
        bytesIn: result.bytesIn,
        error: SPLICE_ERRORS[result.end],
      });
    } finally {
      release(tenant);
    }
  }

  async function forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = Date.now();
    const to = parseAbsolute(req.url);
    const target = typeof to === 'string' ? undefined : to.target;
    const asked = askedOf(clip(req.method, 32), target, req.url);
    const admitted = admit(req, target, typeof to === 'string' ? to : requestMismatch(req, to));
    if ('refusal' in admitted || typeof to === 'string') {
      const refusal =
        'refusal' in admitted
          ? admitted.refusal
          : { status: 400, reason: 'bad-request' as const, rule: 'no URL' };
      refuseResponse(res, refusal);
      return finish(admitted.tenant, asked, started, { decision: 'denied', ...refusal });
    }
    const { tenant } = admitted;
    const up = await open(tenant, admitted.target);
    if (up.kind !== 'open') {
      refuseResponse(res, refusalOf(up));
      return finish(tenant, asked, started, outcomeOf(up));
    }
    const metered = { out: 0, in: 0 };
    const tally = count(tenant);
    const meter = (): boolean => {
      const out = up.socket.bytesWritten - metered.out;
      const inn = up.socket.bytesRead - metered.in;
      metered.out += out;
      metered.in += inn;
      return tally('out', out) && tally('in', inn);
    };
    try {
      const exchange = { req, res, socket: up.socket, to };
      const result = await relay(exchange, { idleTimeoutMs: deps.limits.idleTimeoutMs, meter });
      finish(tenant, asked, started, {
        ...allowed(up),
        bytesOut: metered.out,
        bytesIn: metered.in,
        error: result.error,
      });
    } finally {
      release(tenant);
    }
  }

  server.on(
    'connect',
    (req: IncomingMessage, socket: Socket, head: Buffer) => void tunnel(req, socket, head),
  );
  server.on('request', (req: IncomingMessage, res: ServerResponse) => void forward(req, res));
  server.on('upgrade', (_req: IncomingMessage, socket: Socket) =>
    refuseSocket(socket, { status: 501, rule: 'protocol upgrades are not forwarded; use CONNECT' }),
  );
  server.on('clientError', (_e: Error, socket: Socket) =>
    refuseSocket(socket, { status: 400, rule: 'the request is not valid HTTP' }),
  );

  return {
    accept(socket, tenantOf) {
      if (closed) return void socket.destroy();
      owners.set(socket, tenantOf);
      live.add(socket);
      socket.once('close', () => live.delete(socket));
      server.emit('connection', socket);
    },
    get connections() {
      return live.size;
    },
    close() {
      closed = true;
      for (const s of live) s.destroy();
    },
  };
}

function allowed(up: Extract<Upstream, { kind: 'open' }>): Outcome {
  return { decision: 'allowed', reason: 'allowlist', rule: up.rule, address: up.address };
}

function askedOf(method: string, target: Target | undefined, url: string | undefined): Asked {
  return { method, host: target ? hostOf(target) : clip(url), port: target?.port ?? 0 };
}

/** Why a CONNECT's Host header is refused: it names another host than the CONNECT itself. */
function connectMismatch(req: IncomingMessage, target: Target): string | undefined {
  const host = req.headers.host;
  if (host === undefined || sameAuthority(host, req.url ?? '', target.port)) return undefined;
  return `the Host header (${clip(host)}) disagrees with the CONNECT target (${targetText(target)})`;
}

/** Why a plain-HTTP request's Host header is refused: it names another host than its URL. */
function requestMismatch(req: IncomingMessage, to: AbsoluteRequest): string | undefined {
  const host = req.headers.host;
  if (host === undefined || sameAuthority(host, to.authority, to.target.port)) return undefined;
  return `the Host header (${clip(host)}) disagrees with the request URL (${to.authority})`;
}

function outcomeOf(up: Exclude<Upstream, { kind: 'open' }>): Outcome {
  return up.kind === 'denied'
    ? { decision: 'denied', reason: up.reason, rule: up.rule }
    : { decision: 'allowed', reason: 'allowlist', rule: up.rule, error: up.error, address: up.address };
}

function hostOf(t: Target): string {
  return t.kind === 'name' ? t.host : formatIp(t.ip);
}

function clip(text: string | undefined, max = 300): string {
  return (text ?? '').slice(0, max) || '-';
}
