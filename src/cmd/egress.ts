/**
 * Composition of egress: the proxy the config describes (limits, the SSRF floor with this host's
 * own addresses and the configured internal ranges), and on Docker and oci its per-sandbox sockets.
 */
import { readFileSync } from 'node:fs';
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
import { AppError } from '../shared/errors.js';
import type { ClusterEgress } from '../controller/pod/egress.js';
import type { KubeClient } from '../kube/client.js';

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
  backend: 'docker' | 'oci' | 'kubernetes';
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
 * The egress of a gateway on one machine (the Docker or the oci backend): the proxy in this
 * process and its per-sandbox sockets; none while DISABLE_NETWORK is on (no sandbox may have an
 * allowlist then). Logs how egress stands.
 */
export function socketEgress(
  config: Config,
  env: Env,
  parts: EgressParts & { backend: 'docker' | 'oci' },
): SocketGates | undefined {
  parts.logger.info({ ceiling: config.sandbox.egress.allow.length }, egressSummary(config));
  if (config.sandbox.disableNetwork) return undefined;
  return createSocketGates({ root: socketRoot(config, env), proxy: createProxy(config, parts) });
}

/** The proxy's namespace: configured, else the operator's own. */
export function proxyNamespace(config: Config, ownNamespace: string): string {
  return config.kubernetes.egress.namespace ?? ownNamespace;
}

/** The key of the sandboxes' proxy credentials (the operator's and the proxy's, from one Secret). */
export function egressKey(config: Config): Buffer {
  const file = config.kubernetes.egress.keyFile;
  if (!file) throw new AppError('CONFIG_INVALID', 'kubernetes.egress.keyFile is not set');
  const key = readFileSync(file);
  if (key.length < 16)
    throw new AppError(
      'CONFIG_INVALID',
      `the egress key in ${file} has ${key.length} bytes; it needs 16 or more`,
    );
  return key;
}

const SERVICE_TRIES = 30;

/**
 * How sandboxes reach the egress proxy on this cluster, when it runs one: its Service's cluster IP
 * and port (pods resolve no names), looked up once it exists (the chart makes it with the
 * operator), its pods for the NetworkPolicy, and the credentials' key.
 */
export async function clusterEgress(
  config: Config,
  deps: { kube: Pick<KubeClient, 'getService'>; logger: Logger; ownNamespace: string },
): Promise<ClusterEgress | undefined> {
  const e = config.kubernetes.egress;
  if (!e.enabled) return undefined;
  const namespace = proxyNamespace(config, deps.ownNamespace);
  for (let attempt = 1; ; attempt++) {
    const service = await deps.kube.getService(namespace, e.service).catch(() => undefined);
    const ip = service?.spec?.clusterIP;
    const port = service?.spec?.ports?.[0]?.port;
    if (ip && ip !== 'None' && port) {
      deps.logger.info({ service: `${namespace}/${e.service}`, ip, port }, 'Found the egress proxy');
      return {
        service: { ip, port },
        peer: {
          namespaceLabels: e.namespaceLabels ?? { 'kubernetes.io/metadata.name': namespace },
          podLabels: e.podLabels,
          port: e.port,
        },
        key: egressKey(config),
        networkPolicyEnforced: e.networkPolicyEnforced,
      };
    }
    if (attempt >= SERVICE_TRIES) {
      deps.logger.error(
        { service: `${namespace}/${e.service}` },
        'The egress proxy Service has no cluster IP: runs with an allowlist are refused',
      );
      return undefined;
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}
