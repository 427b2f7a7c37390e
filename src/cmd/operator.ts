/**
 * `sandpit operator`: the Kubernetes operator for SandboxRun and Sandbox resources. Composition root: reads the
 * config and credentials (a kubeconfig, or the pod's service account), builds the policy shared with
 * the Docker backend, serves /healthz, /readyz and /metrics, and shuts down on SIGTERM/SIGINT
 * (drains in-flight reconciles, then releases the Lease).
 */
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { operatorPolicy } from '../config/policy.js';
import type { Config } from '../config/schema.js';
import { createOperatorMetrics } from '../controller/metrics.js';
import { createOperator, type OperatorOptions } from '../controller/operator.js';
import { listenProbes } from '../controller/probes.js';
import { createKubeClient } from '../kube/client.js';
import { currentNamespace, loadKubeConfig } from '../kube/config.js';
import { createAuditMetrics } from '../observability/metrics.js';
import { parse, printHelp } from './args.js';
import { kubeconfigSource, shutdownSignal, toPort } from './process.js';
import { loadContext, openAudit } from './wiring.js';
import { clusterEgress } from './egress.js';
import { egressSummary } from '../config/load.js';

export const OPERATOR_USAGE = `
usage: sandpit operator [options]

Reconciles SandboxRun and Sandbox resources (sandpit.dev/v1alpha1) into hardened pods. Credentials: --kubeconfig
(or KUBECONFIG), else the pod's service account when running in a cluster. Settings: kubernetes: and
kubernetes.operator: in the config (SANDPIT_KUBERNETES_*), and the sandbox: limits the Docker backend
shares.

options:
      --kubeconfig PATH   kubeconfig file (default: KUBECONFIG, in-cluster service account, ~/.kube/config)
      --namespace NS      watch only these namespaces (comma-separated; default kubernetes.operator.namespaces, or all)
      --probe-host HOST   address for /healthz, /readyz, /metrics (default kubernetes.operator.probeHost, 127.0.0.1)
      --probe-port PORT   port for them (default kubernetes.operator.probePort, 8081; 0 picks a free one)
      --identity NAME     leader election identity (default: hostname and a random suffix)
      --log-level LEVEL   fatal, error, warn, info, debug, trace or silent (default: logging.level)
      --config PATH       config file (YAML or JSON); also SANDPIT_CONFIG
  -h, --help              this text
`;

const OPTIONS = {
  kubeconfig: { type: 'string' },
  namespace: { type: 'string' },
  'probe-host': { type: 'string' },
  'probe-port': { type: 'string' },
  identity: { type: 'string' },
  'log-level': { type: 'string' },
  config: { type: 'string' },
} as const;

const NETWORK_SETTING = 'kubernetes.operator.networkPolicyEnforced';
export const NETWORK_WARNING =
  "The config does not say whether this cluster enforces NetworkPolicy: a run or session with egress none starts only in a sandbox whose only interface is lo (e.g. RuntimeClass gvisor), any other is refused. Set networkPolicy.enforced in the chart's values (kubernetes.operator.networkPolicyEnforced): true where the network plugin enforces NetworkPolicy, false to keep refusing without this warning";
const HEALTHY_FAILING_MS = 5 * 60_000;
const SA_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The operator's own namespace: its pod's, else the kubeconfig context's, else default. */
function ownNamespace(fromKubeconfig: string | undefined, inCluster: boolean): string {
  if (inCluster && existsSync(SA_NAMESPACE_FILE)) return readFileSync(SA_NAMESPACE_FILE, 'utf8').trim();
  return fromKubeconfig ?? 'default';
}

function leaseNamespace(config: Config, fromKubeconfig: string | undefined, inCluster: boolean): string {
  return config.kubernetes.operator.leaseNamespace ?? ownNamespace(fromKubeconfig, inCluster);
}

export async function operatorCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, OPTIONS, OPERATOR_USAGE);
  if (values.help) {
    printHelp(OPERATOR_USAGE);
    return 0;
  }
  const ctx = loadContext({
    configPath: values.config,
    ...(values['log-level'] !== undefined ? { logLevel: values['log-level'] } : {}),
  });
  const { config, logger } = ctx;
  const k = config.kubernetes.operator;
  const source = kubeconfigSource(values.kubeconfig);
  const kc = loadKubeConfig(source);
  const kube = createKubeClient(kc);
  const namespaces =
    values.namespace !== undefined
      ? values.namespace
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : k.namespaces;
  const identity = values.identity ?? `${hostname()}_${randomBytes(4).toString('hex')}`;
  const metrics = createOperatorMetrics({ defaultMetrics: true });
  logger.info(egressSummary(config));
  const egress = await clusterEgress(config, {
    kube,
    logger,
    ownNamespace: ownNamespace(currentNamespace(kc), source.inCluster),
  });
  const audit = await openAudit(ctx, 'operator', createAuditMetrics(metrics.registry));
  const options: OperatorOptions = {
    kube,
    logger,
    metrics,
    audit,
    policy: operatorPolicy(config),
    namespaces,
    workers: k.workers,
    watchTimeoutSeconds: k.watchTimeoutSeconds,
    resyncSeconds: k.resyncSeconds,
    pod: {
      imagePullPolicy: k.imagePullPolicy,
      cpuRequestMilli: k.cpuRequest,
      memoryRequestBytes: k.memoryRequest,
      startGraceSeconds: k.startGraceSeconds,
      seccomp: { profile: k.seccompProfile, gvisorRuntimeClasses: k.gvisorRuntimeClasses },
    },
    networkPolicyEnforced: k.networkPolicyEnforced === true,
    egress,
    output: { tailBytes: k.outputTailBytes, readBytes: k.outputReadBytes },
    runSettings: {
      defaultPendingTimeoutSeconds: config.kubernetes.pendingTimeoutSeconds,
      defaultTtlSecondsAfterFinished: k.ttlSecondsAfterFinished,
    },
    instance: identity,
    leaderElection: k.leaderElection
      ? {
          namespace: leaseNamespace(config, currentNamespace(kc), source.inCluster),
          name: k.leaseName,
          identity,
          leaseDurationSeconds: k.leaseDurationSeconds,
          renewDeadlineSeconds: k.renewDeadlineSeconds,
          retryPeriodSeconds: k.retryPeriodSeconds,
        }
      : undefined,
  };
  const operator = createOperator(options);
  const probes = await listenProbes(
    {
      registry: metrics.registry,
      isReady: () => operator.isReady(),
      // Watches failing for this long (the apiserver gone, credentials revoked): let the kubelet restart us.
      isHealthy: () => operator.isHealthy(HEALTHY_FAILING_MS),
    },
    values['probe-host'] ?? k.probeHost,
    values['probe-port'] !== undefined ? toPort(values['probe-port'], '--probe-port') : k.probePort,
  );
  logger.info(
    {
      server: kc.getCurrentCluster()?.server,
      namespaces: namespaces.length ? namespaces : 'all',
      identity,
      probes: probes.url,
      leaderElection: options.leaderElection
        ? `${options.leaderElection.namespace}/${options.leaderElection.name}`
        : false,
    },
    'Started operator',
  );
  if (k.networkPolicyEnforced === undefined) logger.warn({ setting: NETWORK_SETTING }, NETWORK_WARNING);
  const stop = shutdownSignal((signal) => logger.info({ signal }, 'Shutting down'));
  await operator.run(stop.signal);
  await audit.close();
  await probes.close();
  logger.info('Stopped operator');
  return 0;
}
