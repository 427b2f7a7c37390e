/**
 * The Kubernetes backend (DESIGN.md §3): the custom resource is the API. A run becomes a
 * SandboxRun in its tenant's namespace (else the configured one); the operator makes and watches
 * the pod, and the gateway only reads what it made: the run's status by watch, the pod's log while
 * it runs. The SandboxRun is also the run store (run-records.ts): any replica answers get and
 * cancel, so a run can also be let go (release) and go on without this process. The result's
 * phase, reason and exit code are the operator's; its output is the log, captured head and tail
 * like the Docker backend's (stdout and stderr interleaved: the pod log has one stream).
 */
import type { RunResult } from '../../api/run.js';
import { ANNOTATION_OWNER, ANNOTATION_REQUEST_DIGEST } from '../../api/v1alpha1/labels.js';
import type { SandboxRun } from '../../api/v1alpha1/sandboxrun.js';
import { isAlreadyExists } from '../../kube/errors.js';
import { AppError } from '../../shared/errors.js';
import { createKubeClient } from '../../kube/client.js';
import type { KubeConfig } from '../../kube/config.js';
import type { Logger } from '../../observability/logger.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { Policy } from '../../policy/policy.js';
import { onAbort } from '../../shared/abort.js';
import { outputWindow } from '../../runner/protocol.js';
import { Executions, type ExecutionContext } from '../executions.js';
import type {
  BackendHealth,
  RunExecution,
  RunFiles,
  RunRecords,
  SandboxBackend,
  StartOptions,
} from '../types.js';
import { buildSandboxRun } from './build-sandbox-run.js';
import { checkHealth } from './health.js';
import { createRunApi, type ObjectRef, type RunApi } from './run-api.js';
import { createRunFiles } from './run-files.js';
import { createRunRecords } from './run-records.js';
import { BACKEND_NAME, resultFromStatus } from './run-result.js';
import { superviseRun, type SuperviseTiming } from './supervise-run.js';
import { KubernetesSessions } from './sessions/kubernetes-sessions.js';
import { waitPodStopped } from './wait-pod.js';

export interface KubernetesBackendOptions {
  kubeConfig: KubeConfig;
  /** Where runs are created when the caller names no tenant namespace. */
  namespace: string;
  /** The tenants' namespaces (auth.tokens[].namespace): health checks the permissions there too. */
  tenantNamespaces?: readonly string[];
  /** The policy the gateway decides runs by: get_run on another replica names what ran with it. */
  policy: Policy;
  /** The operator's Lease, for health; undefined when its leader election is off. */
  lease: { namespace: string; name: string } | undefined;
  /** Finished runs (and their pods) are deleted this long after they end. */
  ttlSecondsAfterFinished: number;
  /** A run whose pod has not started by then fails (the operator enforces it). */
  pendingTimeoutSeconds: number;
  /** A run that no operator picks up (gives a status) within this time fails with ENGINE_UNAVAILABLE. */
  pickupTimeoutSeconds: number;
  /** Extra labels on every SandboxRun (system labels win). */
  labels?: Readonly<Record<string, string>>;
  logger?: Logger;
  /** This replica's identity on session Leases (a fresh one per process when absent). */
  replicaId?: string | undefined;
  /** Session hand-over: the linger after a session's last request, and how long a request waits for its holder. */
  sessions?: { lingerMs?: number; takeWaitMs?: number };
  /** Overrides for tests. */
  timing?: Partial<Omit<SuperviseTiming, 'pickupTimeoutMs' | 'deadlineMs'>> & { podGoneMs?: number };
}

/** What start() learns while it makes the run's record. */
interface Made {
  /** The run was recorded already (a repeat of its idempotency key): it is followed, not made. */
  adopted: boolean;
  markRecorded: () => void;
  /** Aborted by the execution's release(): stop following, cancel nothing. */
  released: AbortSignal;
}

/** Slack on top of the pending and run time before the gateway gives up on a run. */
const DEADLINE_SLACK_SECONDS = 60;
const HEALTH_CACHE_MS = 5000;
const DEFAULT_TIMING = {
  watchTimeoutSeconds: 60,
  cancelWaitMs: 30_000,
  logGraceMs: 5_000,
  podGoneMs: 60_000,
};

export class KubernetesBackend implements SandboxBackend {
  readonly name = BACKEND_NAME;
  readonly namespace: string;
  readonly runs: RunRecords;
  /** The files runs returned, from the ConfigMaps the operator keeps them in. */
  readonly files: RunFiles;
  private readonly api: RunApi;
  readonly sessions: KubernetesSessions;
  private readonly options: KubernetesBackendOptions;
  private readonly timing: typeof DEFAULT_TIMING;
  /** Live runs: aborting one cancels it. */
  private readonly live = new Set<AbortController>();
  // close() waits for results, not for pods to go: deleting them is the operator's job.
  private readonly executions = new Executions({ backend: this.name, untilCleanedUp: false });
  /** Aborted by close(): the waits for finished runs' pods to go end, not to hold the process. */
  private readonly closing = new AbortController();
  private healthCache: { at: number; value: Promise<BackendHealth> } | undefined;

  constructor(options: KubernetesBackendOptions) {
    this.options = options;
    this.namespace = options.namespace;
    const kube = createKubeClient(options.kubeConfig);
    this.api = createRunApi(kube);
    this.timing = { ...DEFAULT_TIMING, ...options.timing };
    this.sessions = new KubernetesSessions({
      kube,
      namespace: options.namespace,
      tenantNamespaces: options.tenantNamespaces,
      holder: options.replicaId,
      ttlSecondsAfterFinished: options.ttlSecondsAfterFinished,
      pendingTimeoutSeconds: options.pendingTimeoutSeconds,
      labels: options.labels,
      lingerMs: options.sessions?.lingerMs,
      takeWaitMs: options.sessions?.takeWaitMs,
      watchTimeoutSeconds: this.timing.watchTimeoutSeconds,
      logger: options.logger,
    });
    this.files = createRunFiles({ api: this.api, namespace: this.namespace });
    this.runs = createRunRecords({
      api: this.api,
      namespace: this.namespace,
      policy: options.policy,
      cancelWaitMs: this.timing.cancelWaitMs,
      watchTimeoutSeconds: this.timing.watchTimeoutSeconds,
    });
  }

  start(spec: EffectiveSpec, options: StartOptions): RunExecution {
    let markRecorded!: () => void;
    const recorded = new Promise<void>((r) => (markRecorded = r));
    const release = new AbortController();
    const made: Made = { adopted: false, markRecorded, released: release.signal };
    const execution = this.executions.start(spec, options, (ctx) => this.execute(spec, options, ctx, made));
    void execution.result.then(markRecorded, markRecorded);
    return { ...execution, recorded, adopted: () => made.adopted, release: () => release.abort() };
  }

  private async execute(
    spec: EffectiveSpec,
    { runId, signal, principal, owner, namespace: tenant, requestDigest, task }: StartOptions,
    { output, cleanedUp, startedAt }: ExecutionContext,
    made: Made,
  ): Promise<RunResult> {
    const o = this.options;
    const namespace = tenant ?? this.namespace;
    let created;
    try {
      created = await this.api.createRun(
        namespace,
        buildSandboxRun(spec, {
          runId,
          namespace,
          principal: principal ?? 'unknown',
          owner,
          requestDigest,
          task,
          ttlSecondsAfterFinished: o.ttlSecondsAfterFinished,
          pendingTimeoutSeconds: o.pendingTimeoutSeconds,
          ...(o.labels ? { labels: o.labels } : {}),
        }),
      );
      o.logger?.debug({ run: `${namespace}/${runId}` }, 'Created SandboxRun');
    } catch (e) {
      created =
        requestDigest !== undefined
          ? await this.adoptable(e, { namespace, name: runId }, owner, requestDigest).catch(
              (err: unknown) => {
                cleanedUp();
                throw err;
              },
            )
          : undefined;
      if (!created) {
        cleanedUp();
        throw e;
      }
      made.adopted = true;
      o.logger?.debug({ run: `${namespace}/${runId}` }, 'Following the SandboxRun of a repeated requestId');
    }
    made.markRecorded();
    const stop = new AbortController();
    // An abort while the object was being created counts too: onAbort calls at once if so.
    const detach = onAbort(signal, () => stop.abort());
    this.live.add(stop);
    let podName: string | undefined;
    let phase: string | undefined;
    try {
      const done = await superviseRun({
        api: this.api,
        namespace,
        name: runId,
        // An adopted run is read first: it may have ended already, and a watch shows only changes.
        resourceVersion: made.adopted ? undefined : created.metadata?.resourceVersion,
        window: outputWindow(spec.limits.outputBytes),
        files: spec.outputs.entries.length > 0,
        timing: {
          watchTimeoutSeconds: this.timing.watchTimeoutSeconds,
          cancelWaitMs: this.timing.cancelWaitMs,
          logGraceMs: this.timing.logGraceMs,
          pickupTimeoutMs: o.pickupTimeoutSeconds * 1000,
          deadlineMs: (o.pendingTimeoutSeconds + spec.limits.timeoutSeconds + DEADLINE_SLACK_SECONDS) * 1000,
        },
        onChunk: (c) => output.push(c),
        signal: stop.signal,
        release: made.released,
        logger: o.logger,
      });
      podName = done.status.podName;
      phase = done.status.phase;
      return resultFromStatus({
        runId,
        spec,
        status: done.status,
        output: done.output,
        outputNote: done.outputNote,
        startedAt,
        finishedAt: Date.now(),
      });
    } finally {
      detach();
      this.live.delete(stop);
      // After the result has gone on: opening the pod's watch takes a few ms of this thread.
      setImmediate(() => void this.cleanUp({ namespace, name: runId }, podName, phase).finally(cleanedUp));
    }
  }

  /**
   * The SandboxRun a create under an idempotency key found in its way (AlreadyExists): followed
   * when it is the same owner's run of the same request; a CONFLICT when it is another request's.
   * Undefined when the create failed for another reason (the caller rethrows that).
   */
  private async adoptable(
    e: unknown,
    ref: ObjectRef,
    owner: string | undefined,
    requestDigest: string,
  ): Promise<SandboxRun | undefined> {
    if (!(e instanceof AppError && isAlreadyExists(e.cause))) return undefined;
    const existing = await this.api.getRun(ref);
    if (!existing) return undefined;
    const a = existing.metadata.annotations ?? {};
    if (a[ANNOTATION_OWNER] !== owner || a[ANNOTATION_REQUEST_DIGEST] !== requestDigest) {
      throw new AppError(
        'CONFLICT',
        `the requestId of this run was already used for another request (SandboxRun ${ref.namespace}/${ref.name})`,
        {
          violations: [{ field: 'requestId', message: 'already used for a different request' }],
          hint: 'send a new requestId for a new request; repeat a request only with exactly what it sent',
        },
      );
    }
    return existing;
  }

  /** Waits until the run's pod no longer runs (a cancelled run's pod: until it is deleted). */
  private async cleanUp(
    run: { namespace: string; name: string },
    podName: string | undefined,
    phase: string | undefined,
  ): Promise<void> {
    if (!podName || this.closing.signal.aborted) return;
    const stopped = await waitPodStopped(this.api, {
      namespace: run.namespace,
      pod: podName,
      until: phase === 'Cancelled' ? 'absent' : 'stopped',
      timeoutMs: this.timing.podGoneMs,
      watchTimeoutSeconds: this.timing.watchTimeoutSeconds,
      signal: this.closing.signal,
    });
    if (!stopped && !this.closing.signal.aborted) {
      this.options.logger?.warn(
        { run: `${run.namespace}/${run.name}`, pod: podName },
        'Pod of finished SandboxRun was not seen stopped; the operator deletes it',
      );
    }
  }

  /** Checked at most every HEALTH_CACHE_MS: GET /health is unauthenticated and costs several API calls. */
  health(): Promise<BackendHealth> {
    const now = Date.now();
    if (this.healthCache && now - this.healthCache.at < HEALTH_CACHE_MS) return this.healthCache.value;
    const value = checkHealth(this.api, {
      namespaces: [...new Set([this.namespace, ...(this.options.tenantNamespaces ?? [])])],
      lease: this.options.lease,
    });
    this.healthCache = { at: now, value };
    return value;
  }

  /**
   * Stops accepting runs, cancels the live ones (a released run is not followed any more) and
   * waits for their results (the operator removes their pods: the waits for them to go end here,
   * or their watches would keep the process alive for as long as a pod takes to be deleted). Sessions are let go, still running: their Leases
   * released, for any replica.
   */
  async close(): Promise<void> {
    this.executions.close();
    for (const run of this.live) run.abort();
    await Promise.all([this.executions.settled(), this.sessions.detachAll()]);
    this.closing.abort();
  }
}
