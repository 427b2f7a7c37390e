/**
 * Composition: config, logger, backend and service wired together for the commands. Process
 * concerns (signals, the version, credentials' source, error output) live in process.ts.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { RunRequestSchema } from '../api/run.js';
import { homedir } from 'node:os';
import Docker from 'dockerode';
import { DockerBackend } from '../backends/docker/docker-backend.js';
import { OciBackend } from '../backends/oci/oci-backend.js';
import type { RunFilesOptions } from '../backends/run-file-store.js';
import { BUILTIN_TEMPLATES } from '../policy/templates.js';
import type { SandboxBackend } from '../backends/types.js';
import { auditFileFor } from '../config/audit.js';
import { defaultStateDir } from '../config/instance.js';
import { fileJournal, type SessionJournal } from '../gateway/session-journal.js';
import { fileRunJournal, type RunJournal } from '../gateway/run-journal.js';
import { currentOwner, ownerAlive } from '../backends/docker/owner.js';
import { configWarnings, loadConfig } from '../config/load.js';
import { operatorPolicy, policyFromConfig } from '../config/policy.js';
import type { Config } from '../config/schema.js';
import { SandpitService, type ServiceOptions } from '../gateway/service.js';
import { createAuditTrail, type AuditTrail } from '../observability/audit-trail.js';
import type { AuditMetrics } from '../observability/metrics.js';
import { createLogger, type Logger } from '../observability/logger.js';
import { createMetrics, type Metrics } from '../observability/metrics.js';
import { evaluate, type EffectiveSpec } from '../policy/evaluate.js';
import { evaluateSession } from '../policy/session.js';
import { SessionRequestSchema } from '../api/session.js';
import { sessionShape } from '../backends/docker/session/docker-sessions.js';
import type { SandboxShape } from '../policy/shape.js';
import type { Policy } from '../policy/policy.js';
import { AppError, isAppError } from '../shared/errors.js';
import type { SocketGates } from '../egress/socket-gates.js';
import { kubeconfigSource } from './process.js';
import { socketEgress, type EgressParts } from './egress.js';

export interface Context {
  config: Config;
  logger: Logger;
}

export function loadContext(options: {
  configPath?: string | undefined;
  logFd?: 1 | 2;
  logLevel?: string;
}): Context {
  const deprecated: string[] = [];
  const config = loadConfig({
    env: process.env,
    warnings: deprecated,
    ...(options.configPath ? { configPath: options.configPath } : {}),
    // Validated like every setting: a bad --log-level is a config error (exit 78), not a crash.
    flags:
      options.logLevel === undefined
        ? []
        : [{ field: 'logging.level', flag: '--log-level', value: options.logLevel }],
  });
  const logger = createLogger({ level: config.logging.level, fd: options.logFd ?? 2 });
  for (const warning of [...deprecated, ...configWarnings(config)]) logger.warn(warning);
  return { config, logger };
}

/** How often a long-running Docker backend looks for leftovers of crashed sandpit processes. */
const REAP_INTERVAL_MS = 60_000;

export interface Wiring {
  service: SandpitService;
  backend: DockerBackend;
  metrics: Metrics;
}

/**
 * The Docker backend and the service over it, with leftovers of crashed callers reaped first and
 * the configured pools pre-warmed. One-shot commands pass `pools: false`.
 * `tolerateEngineDown`: a server starts anyway when the engine does not answer, so that its health
 * tools can say how to start it. `instanceId`: the gateway instance its sessions belong to
 * (config/instance.ts), so that a restart adopts them; without one they end with the process.
 */
export async function wireDocker(
  ctx: Context,
  options: {
    defaultMetrics?: boolean;
    tolerateEngineDown?: boolean;
    pools?: boolean;
    instanceId?: string;
    /** Tests: the egress proxy's resolver and dialer (test names, loopback only). */
    egress?: Pick<EgressParts, 'resolve' | 'dial'>;
  } = {},
): Promise<Wiring> {
  const { config, logger } = ctx;
  if (config.sandbox.backend !== 'docker') {
    throw new AppError(
      'CONFIG_INVALID',
      `this command runs the docker backend, but sandbox.backend is ${config.sandbox.backend}`,
    );
  }
  const metrics = createMetrics(options);
  const policy = policyFromConfig(config);
  const { prewarm, prewarmSessions, ...pool } = config.pool;
  const { audit, gates } = await auditAndEgress(ctx, metrics, 'docker', options.egress);
  const backend = new DockerBackend({
    socketPath: config.docker.socketPath,
    pool: {
      ...pool,
      enabled: pool.enabled && options.pools !== false,
      maxRunSeconds: config.sandbox.timeoutSeconds,
    },
    metrics,
    logger,
    instanceId: options.instanceId,
    runFiles: runFilesOf(config),
    gates,
  });
  let reaped: string[] = [];
  try {
    reaped = await backend.reap();
  } catch (e) {
    if (!options.tolerateEngineDown) throw e;
    logger.warn(
      { err: isAppError(e) ? e.message : String(e) },
      'the container engine did not answer; starting anyway',
    );
  }
  if (reaped.length) logger.info({ containers: reaped }, 'removed containers left behind by crashed runs');
  // A server also removes what other, crashed, sandpit processes leave behind while it runs.
  if (options.pools !== false) backend.startReaping(REAP_INTERVAL_MS);
  backend.pool?.start(
    prewarm.map((template) => defaultShape(template, policy)),
    prewarmSessions.map((template) => defaultSessionShape(template, policy)),
  );
  const journal = options.instanceId ? sessionJournalFor(ctx, options.instanceId) : undefined;
  const service = await createService(ctx, {
    backend,
    policy,
    metrics,
    journal,
    audit,
    runJournal: runJournalFor(ctx),
  });
  service.runs.auditLost();
  return { service, backend, metrics };
}

/**
 * Where the runs under way of every sandpit process on this state directory are remembered: a run
 * whose process dies with it (its sandbox goes too, on Docker and oci) is audited by the next one.
 */
function runJournalFor(ctx: Context): RunJournal {
  return fileRunJournal(join(defaultStateDir(process.env), 'runs'), ctx.logger, {
    owner: currentOwner(),
    alive: ownerAlive,
  });
}

/** Where the backends of one machine (Docker, oci) keep runs' output files: under the state directory. */
function runFilesOf(config: Config): RunFilesOptions {
  return { dir: join(defaultStateDir(process.env), 'run-files'), maxBytes: config.docker.runFilesBytes };
}

/**
 * A one-machine gateway's audit trail, opened first (the egress proxy writes a record per
 * connection into it), and the egress proxy in this process with a socket per allowlist sandbox.
 */
async function auditAndEgress(
  ctx: Context,
  metrics: Metrics,
  backend: 'docker' | 'oci',
  egress: Pick<EgressParts, 'resolve' | 'dial'> | undefined,
): Promise<{ audit: AuditTrail; gates: SocketGates | undefined }> {
  const audit = await openAudit(ctx, 'gateway', metrics.audit);
  const gates = socketEgress(ctx.config, process.env, {
    audit,
    metrics: metrics.egress,
    logger: ctx.logger,
    backend,
    ...egress,
  });
  return { audit, gates };
}

/** Where a gateway instance remembers its live sessions: under the state directory, one folder per instance. */
function sessionJournalFor(ctx: Context, instanceId: string): SessionJournal {
  const instance = createHash('sha256').update(instanceId).digest('hex').slice(0, 16);
  return fileJournal(join(defaultStateDir(process.env), 'sessions', instance), ctx.logger);
}

export interface BackendWiring {
  service: SandpitService;
  backend: SandboxBackend;
  metrics: Metrics;
}

/** The backend `sandbox.backend` names (docker, kubernetes or oci), and the service over it. */
export async function wireBackend(
  ctx: Context,
  options: { defaultMetrics?: boolean; tolerateEngineDown?: boolean; instanceId?: string } = {},
): Promise<BackendWiring> {
  switch (ctx.config.sandbox.backend) {
    case 'kubernetes':
      return wireKubernetes(ctx, options);
    case 'oci':
      return wireOci(ctx, options);
    case 'docker':
      return wireDocker(ctx, options);
  }
}

/**
 * The OCI backend the config describes (`oci:`), its runtimes' binaries and folders (and, for a
 * gateway, the egress proxy's sockets).
 */
export function ociBackend(
  config: Config,
  extra: { logger?: Logger; metrics?: Metrics; gates?: SocketGates | undefined } = {},
): OciBackend {
  const cache = process.env.XDG_CACHE_HOME?.startsWith('/')
    ? process.env.XDG_CACHE_HOME
    : join(process.env.HOME || homedir(), '.cache');
  return new OciBackend({
    docker: new Docker({ socketPath: config.docker.socketPath }),
    layout: {
      runDir: config.oci.runDir,
      rootfsDir: config.oci.rootfsDir ?? join(cache, 'sandpit', 'oci', 'rootfs'),
      cgroupRoot: '/sys/fs/cgroup',
    },
    binaries: { runc: config.oci.runcPath, runsc: config.oci.runscPath },
    images: BUILTIN_TEMPLATES.map((t) => t.image),
    imageRefreshMs: config.oci.imageRefreshSeconds * 1000,
    runFiles: runFilesOf(config),
    ...extra,
  });
}

/**
 * The OCI backend (runc or runsc driven directly, no engine on the critical path) and the service
 * over it, with the leftovers of dead sandpit processes reaped first. `reaping: false` (one-shot
 * commands): no periodic reaper. Egress as on Docker: the proxy in this process, a socket per
 * allowlist sandbox.
 */
export async function wireOci(
  ctx: Context,
  options: {
    defaultMetrics?: boolean;
    reaping?: boolean;
    /** Tests: the egress proxy's resolver and dialer (test names, loopback only). */
    egress?: Pick<EgressParts, 'resolve' | 'dial'>;
  } = {},
): Promise<BackendWiring> {
  const { config, logger } = ctx;
  const metrics = createMetrics(options);
  const { audit, gates } = await auditAndEgress(ctx, metrics, 'oci', options.egress);
  const backend = ociBackend(config, { logger, metrics, gates });
  const reaped = await backend.reap();
  if (reaped.removed.length) {
    logger.info({ containers: reaped.removed }, 'removed containers left behind by crashed runs');
  }
  if (options.reaping !== false) backend.startReaping(REAP_INTERVAL_MS);
  const service = await createService(ctx, {
    backend,
    policy: policyFromConfig(config),
    metrics,
    audit,
    runJournal: runJournalFor(ctx),
  });
  service.runs.auditLost();
  return { service, backend, metrics };
}

/**
 * The Kubernetes backend: runs become SandboxRuns in kubernetes.gateway.namespace (a tenant's in
 * its token's namespace), reconciled by the operator. The policy is the operator's (RuntimeClasses
 * in place of Docker runtimes), so both sides decide alike. Loaded on demand: only this path needs
 * @kubernetes/client-node.
 */
async function wireKubernetes(ctx: Context, options: { defaultMetrics?: boolean }): Promise<BackendWiring> {
  const { backend, policy } = await kubernetesBackend(ctx);
  const metrics = createMetrics(options);
  const service = await createService(ctx, { backend, policy, metrics });
  return { service, backend, metrics };
}

/** The Kubernetes backend the config describes, and the policy it decides by (also `sandpit doctor`'s). */
export async function kubernetesBackend(ctx: Context): Promise<{ backend: SandboxBackend; policy: Policy }> {
  const { config, logger } = ctx;
  const { gateway, operator, pendingTimeoutSeconds } = config.kubernetes;
  const [{ KubernetesBackend }, { currentNamespace, loadKubeConfig }] = await Promise.all([
    import('../backends/kubernetes/kubernetes-backend.js'),
    import('../kube/config.js'),
  ]);
  const kubeConfig = loadKubeConfig(kubeconfigSource(gateway.kubeconfig));
  const namespace = gateway.namespace ?? currentNamespace(kubeConfig) ?? 'default';
  const policy = operatorPolicy(config);
  const tenants = tenantNamespaces(config);
  const backend = new KubernetesBackend({
    kubeConfig,
    namespace,
    tenantNamespaces: tenants,
    policy,
    lease: operator.leaderElection
      ? { namespace: operator.leaseNamespace ?? 'sandpit-system', name: operator.leaseName }
      : undefined,
    ttlSecondsAfterFinished: gateway.ttlSecondsAfterFinished,
    pendingTimeoutSeconds,
    pickupTimeoutSeconds: gateway.pickupTimeoutSeconds,
    logger,
  });
  logger.info(
    { server: kubeConfig.getCurrentCluster()?.server, namespace, tenants },
    'Runs are SandboxRuns (kubernetes backend)',
  );
  return { backend, policy };
}

/** The namespaces tokens are mapped to (auth.tokens[].namespace), each once. */
export function tenantNamespaces(config: Config): string[] {
  return [...new Set(config.auth.tokens.flatMap((t) => (t.namespace ? [t.namespace] : [])))];
}

/** The service over a backend, with the config's slots and an opened audit trail. */
async function createService(
  ctx: Context,
  parts: {
    backend: SandboxBackend;
    policy: Policy;
    metrics: Metrics;
    journal?: SessionJournal | undefined;
    runJournal?: RunJournal | undefined;
    /** The audit trail, when it is open already. */
    audit?: AuditTrail;
  },
): Promise<SandpitService> {
  const { config, logger } = ctx;
  const audit = parts.audit ?? (await openAudit(ctx, 'gateway', parts.metrics.audit));
  if (audit.file) logger.info({ file: audit.file }, 'Writing the audit trail');
  return new SandpitService({
    ...parts,
    logger,
    audit,
    ...serviceLimits(config),
  });
}

/**
 * The audit trail `audit.*` describes, opened. A file that cannot be opened does not stop start-up:
 * the trail's gate refuses runs with AUDIT_UNAVAILABLE (saying which file and why) until it can.
 */
export async function openAudit(
  ctx: Context,
  role: 'gateway' | 'operator',
  metrics: AuditMetrics,
): Promise<AuditTrail> {
  const file = auditFileFor(ctx.config, process.env, role);
  const audit = createAuditTrail({
    logger: ctx.logger,
    metrics,
    commandPreview: ctx.config.audit.commandPreview,
    file,
  });
  await audit.open();
  return audit;
}

/** The container shape a template's sessions get by default: what a pre-warmed session pool holds. */
function defaultSessionShape(template: string, policy: Policy): SandboxShape {
  const evaluation = evaluateSession(SessionRequestSchema.parse({ template }), policy);
  if (!evaluation.ok) {
    throw new AppError(
      'CONFIG_INVALID',
      `pool.prewarmSessions: cannot pre-warm "${template}": ${evaluation.violations.map((v) => v.message).join('; ')}`,
    );
  }
  return sessionShape(evaluation.spec);
}

/** The container shape a template's runs get by default: what a pre-warmed pool should hold. */
function defaultShape(template: string, policy: Policy): EffectiveSpec {
  const evaluation = evaluate(RunRequestSchema.parse({ template, code: '' }), policy);
  if (!evaluation.ok) {
    throw new AppError(
      'CONFIG_INVALID',
      `pool.prewarm: cannot pre-warm "${template}": ${evaluation.violations.map((v) => v.message).join('; ')}`,
    );
  }
  return evaluation.spec;
}

/** The limits both backends' services share: concurrency slots, rate limits and the history of finished runs. */
function serviceLimits(config: Config): Pick<ServiceOptions, 'slots' | 'history' | 'sessions' | 'rates'> {
  return {
    slots: { maxConcurrent: config.sandbox.maxConcurrentRuns, maxQueued: config.sandbox.maxQueuedRuns },
    rates: {
      runsPerMinute: config.sandbox.runsPerMinute,
      outputBytesPerMinute: config.sandbox.outputBytesPerMinute,
    },
    history: { maxBytes: config.server.runHistoryBytes },
    sessions: {
      max: config.sessions.max,
      maxPerPrincipal: config.sessions.maxPerPrincipal,
      logExecs: config.sessions.logExecs,
      logBytes: config.sessions.logBytes,
    },
  };
}
