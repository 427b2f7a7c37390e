/**
 * `sandpit egress-proxy`: the egress proxy of a Kubernetes cluster (a Deployment in the chart).
 * Sandbox pods with an allowlist reach it, and only it, through their NetworkPolicy; each request
 * carries its run's or session's credential, and the proxy finds the SandboxRun or Sandbox by the
 * credential and the source pod's address (src/egress/cluster-tenants.ts, cluster-lookups.ts) in
 * its caches of sandpit's pods, SandboxRuns and Sandboxes, holds the connection to that allowlist
 * and the SSRF floor, and writes one audit record per connection.
 */
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { SANDBOX } from '../api/v1alpha1/sandbox.js';
import { SANDBOX_RUN } from '../api/v1alpha1/sandboxrun.js';
import { operatorPolicy } from '../config/policy.js';
import type { Config } from '../config/schema.js';
import { listenProbes } from '../controller/probes.js';
import { kindSource, podSource } from '../controller/sources.js';
import { createClusterTenants } from '../egress/cluster-tenants.js';
import { createKubeClient, type KubeClient } from '../kube/client.js';
import { loadKubeConfig } from '../kube/config.js';
import { Informer, InformerSet, type InformerSource } from '../kube/informer.js';
import type { KubeObject, Pod } from '../kube/objects.js';
import type { Logger } from '../observability/logger.js';
import { createAuditMetrics, createEgressMetrics } from '../observability/metrics.js';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { parse, printHelp } from './args.js';
import { clusterLookups, type RunObject, type SandboxObject } from './cluster-lookups.js';
import { createProxy, egressKey } from './egress.js';
import { aborted, kubeconfigSource, shutdownSignal, toPort } from './process.js';
import { loadContext, openAudit } from './wiring.js';

export const EGRESS_PROXY_USAGE = `
usage: sandpit egress-proxy [options]

The egress proxy of a Kubernetes cluster: sandbox pods whose SandboxRun or Sandbox has an egress
allowlist connect here (HTTP CONNECT and plain HTTP) with their run's or session's credential, and
reach only what the allowlist names. Settings: kubernetes.egress (keyFile, port, listenHost, probePort) and
sandbox.egress (limits, internalCidrs) in the config; it watches kubernetes.operator.namespaces.

options:
      --kubeconfig PATH   kubeconfig file (default: KUBECONFIG, in-cluster service account, ~/.kube/config)
      --port PORT         proxy port (default kubernetes.egress.port, 3128; 0 picks a free one)
      --probe-port PORT   /healthz, /readyz, /metrics (default kubernetes.egress.probePort, 8082)
      --log-level LEVEL   fatal, error, warn, info, debug, trace or silent (default: logging.level)
      --config PATH       config file (YAML or JSON); also SANDPIT_CONFIG
  -h, --help              this text
`;

const OPTIONS = {
  kubeconfig: { type: 'string' },
  port: { type: 'string' },
  'probe-port': { type: 'string' },
  'log-level': { type: 'string' },
  config: { type: 'string' },
} as const;

const SWEEP_MS = 60_000;
const WATCH_TIMEOUT_SECONDS = 300;

function caches(kube: KubeClient, namespaces: string[], logger: Logger) {
  const informer = <T extends KubeObject>(source: InformerSource<T>) =>
    new Informer<T>(kube, source, { logger, watchTimeoutSeconds: WATCH_TIMEOUT_SECONDS });
  return {
    pods: new InformerSet<Pod>(namespaces, (ns) => informer(podSource(kube, ns))),
    runs: new InformerSet<RunObject>(namespaces, (ns) =>
      informer(kindSource<RunObject>(kube, SANDBOX_RUN, ns)),
    ),
    sandboxes: new InformerSet<SandboxObject>(namespaces, (ns) =>
      informer(kindSource<SandboxObject>(kube, SANDBOX, ns)),
    ),
  };
}

function listen(server: Server, host: string, port: number): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server.address() as AddressInfo));
  });
}

export async function egressProxyCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, OPTIONS, EGRESS_PROXY_USAGE);
  if (values.help) {
    printHelp(EGRESS_PROXY_USAGE);
    return 0;
  }
  const ctx = loadContext({
    configPath: values.config,
    ...(values['log-level'] !== undefined ? { logLevel: values['log-level'] } : {}),
  });
  const { config, logger } = ctx;
  const e: Config['kubernetes']['egress'] = config.kubernetes.egress;
  const kube = createKubeClient(loadKubeConfig(kubeconfigSource(values.kubeconfig)));
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const audit = await openAudit(ctx, 'operator', createAuditMetrics(registry));
  const namespaces = config.kubernetes.operator.namespaces;
  const cached = caches(kube, namespaces, logger);
  const { pods, runs, sandboxes } = cached;
  const informers = [...pods.informers, ...runs.informers, ...sandboxes.informers];
  for (const i of informers) i.start();
  const tenants = createClusterTenants(egressKey(config), clusterLookups(cached, operatorPolicy(config)));
  const sweep = setInterval(() => tenants.sweep(), SWEEP_MS);
  const proxy = createProxy(config, {
    audit,
    metrics: createEgressMetrics(registry),
    logger,
    backend: 'kubernetes',
  });
  const server = createServer({ allowHalfOpen: true }, (socket) => proxy.accept(socket, tenants.tenantOf));
  const address = await listen(
    server,
    e.listenHost,
    values.port !== undefined ? toPort(values.port, '--port') : e.port,
  );
  const probes = await listenProbes(
    {
      registry,
      isReady: () => pods.hasSynced() && runs.hasSynced() && sandboxes.hasSynced(),
      isHealthy: () => true,
    },
    e.listenHost,
    values['probe-port'] !== undefined ? toPort(values['probe-port'], '--probe-port') : e.probePort,
  );
  logger.info(
    {
      proxy: `${address.address}:${address.port}`,
      probes: probes.url,
      namespaces: namespaces.length ? namespaces : 'all',
    },
    'Started egress proxy',
  );
  const stop = shutdownSignal((signal) => logger.info({ signal }, 'Shutting down'));
  await aborted(stop.signal);
  clearInterval(sweep);
  server.close();
  proxy.close();
  await Promise.all(informers.map((i) => i.stop()));
  await audit.close();
  await probes.close();
  logger.info('Stopped egress proxy');
  return 0;
}
