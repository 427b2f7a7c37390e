/**
 * Composition of egress: the proxy the config describes (limits, the SSRF floor with this host's
 * own addresses and the configured internal ranges), and on Docker its per-sandbox sockets.
 */
import { networkInterfaces } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { egressSummary } from '../config/load.js';
import { defaultStateDir } from '../config/instance.js';
import type { Config } from '../config/schema.js';
import { buildFloor, type Floor } from '../egress/floor.js';
import { createEgressProxy, type EgressProxy } from '../egress/proxy.js';
import { createSocketGates, type SocketGates } from '../egress/socket-gates.js';
import type { EgressLimits } from '../egress/tenant.js';
import type { Dialer, Resolver } from '../egress/upstream.js';
import type { AuditTrail } from '../observability/audit-trail.js';
import type { Logger } from '../observability/logger.js';
import type { EgressMetrics } from '../observability/metrics.js';
import { cidr, parseIp, unmapIp, type IpAddress } from '../shared/ip.js';

type Env = Readonly<Record<string, string | undefined>>;

export function egressLimits(config: Config): EgressLimits {
  const e = config.sandbox.egress;
  return {
    maxConnections: e.maxConnections,
    maxBytes: e.maxBytes,
    connectTimeoutMs: e.connectTimeoutSeconds * 1000,
    idleTimeoutMs: e.idleTimeoutSeconds * 1000,
  };
}

/** Every address this host has (the proxy's host: never a destination). */
export function ownAddresses(): IpAddress[] {
  return Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .map((i) => parseIp(i.address.split('%')[0]!))
    .filter((ip) => ip !== undefined)
    .map(unmapIp);
}

export function egressFloor(config: Config): Floor {
  return buildFloor({
    ownAddresses: ownAddresses(),
    internalCidrs: config.sandbox.egress.internalCidrs.map(cidr),
  });
}

/** Where the per-sandbox sockets live: short enough for a socket path (108 bytes with the id and name). */
export function socketRoot(config: Config, env: Env): string {
  const configured = config.sandbox.egress.socketDir;
  if (configured) return configured;
  const runtime = env.XDG_RUNTIME_DIR;
  return runtime && isAbsolute(runtime)
    ? join(runtime, 'sandpit', 'egress')
    : join(defaultStateDir(env), 'egress');
}

export interface EgressParts {
  audit: AuditTrail;
  metrics: EgressMetrics;
  logger: Logger;
  backend: 'docker' | 'kubernetes';
  /** Tests: a resolver of test names, a dialer that stays on loopback. */
  resolve?: Resolver;
  dial?: Dialer;
}

export function createProxy(config: Config, parts: EgressParts): EgressProxy {
  return createEgressProxy({
    floor: egressFloor(config),
    limits: egressLimits(config),
    backend: parts.backend,
    audit: (record) => parts.audit.record(record),
    metrics: parts.metrics,
    logger: parts.logger,
    ...(parts.resolve ? { resolve: parts.resolve } : {}),
    ...(parts.dial ? { dial: parts.dial } : {}),
  });
}

/**
 * The Docker gateway's egress: the proxy in this process and its per-sandbox sockets; none while
 * DISABLE_NETWORK is on (no sandbox may have an allowlist then). Logs how egress stands.
 */
export function dockerEgress(
  config: Config,
  env: Env,
  parts: Omit<EgressParts, 'backend'>,
): SocketGates | undefined {
  parts.logger.info({ ceiling: config.sandbox.egress.allow.length }, egressSummary(config));
  if (config.sandbox.disableNetwork) return undefined;
  return createSocketGates({
    root: socketRoot(config, env),
    proxy: createProxy(config, { ...parts, backend: 'docker' }),
  });
}
