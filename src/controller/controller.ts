/**
 * The SandboxRun controller: informers feed keys into the work queue, N workers reconcile them.
 * Child events map to their owning run's key; requeue hints and failures come back as timed adds.
 * start() returns once the caches are synced and the workers run; stop() drains in-flight passes.
 */
import type { SandboxRun } from '../api/v1alpha1/sandboxrun.js';
import type { KubeClient } from '../kube/client.js';
import { isConflict } from '../kube/errors.js';
import { Informer, type InformerSource } from '../kube/informer.js';
import {
  objectKey,
  type ConfigMap,
  type KubeObject,
  type NetworkPolicy,
  type Pod,
  type RuntimeClass,
} from '../kube/objects.js';
import { InformerSet } from '../kube/store.js';
import type { Logger } from '../observability/logger.js';
import type { Policy } from '../policy/policy.js';
import { sleep } from '../shared/abort.js';
import type { PodSettings } from './build-pod.js';
import { ownerKey } from './children.js';
import { createEventRecorder } from './events.js';
import type { OperatorMetrics } from './metrics.js';
import type { OutputLimits } from './read-output.js';
import { reconcileRun, type ReconcileDeps, type RunSettings } from './reconcile.js';
import { configMapSource, networkPolicySource, podSource, runSource, runtimeClassSource } from './sources.js';
import { StatusOverlay } from './status-overlay.js';
import { WorkQueue } from './workqueue.js';

export interface ControllerOptions {
  kube: KubeClient;
  logger: Logger;
  metrics: OperatorMetrics;
  policy: Policy;
  /** Namespaces to watch; empty means all. */
  namespaces: readonly string[];
  workers: number;
  watchTimeoutSeconds: number;
  resyncSeconds: number;
  pod: PodSettings;
  output: OutputLimits;
  runSettings: RunSettings;
  /** Identity in Events (reportingInstance). */
  instance: string;
  now?: () => Date;
}

export class Controller {
  private readonly options: ControllerOptions;
  readonly queue = new WorkQueue({ baseDelayMs: 200, maxDelayMs: 60_000 });
  private readonly runs: InformerSet<SandboxRun>;
  private readonly pods: InformerSet<Pod>;
  private readonly configMaps: InformerSet<ConfigMap>;
  private readonly networkPolicies: InformerSet<NetworkPolicy>;
  private readonly runtimeClasses: Informer<RuntimeClass>;
  private readonly overlay = new StatusOverlay();
  private workers: Promise<void>[] = [];
  private resync: NodeJS.Timeout | undefined;
  private started = false;
  private active = true;
  private resumed: (() => void)[] = [];
  private readonly stopper = new AbortController();

  constructor(options: ControllerOptions) {
    this.options = options;
    const { kube, namespaces } = options;
    const informer = <T extends KubeObject>(source: InformerSource<T>): Informer<T> =>
      new Informer<T>(kube, source, {
        logger: options.logger,
        watchTimeoutSeconds: options.watchTimeoutSeconds,
        onRestart: (reason) => options.metrics.watchRestarts.inc({ resource: source.resource, reason }),
      });
    this.runs = new InformerSet(namespaces, (ns) => informer(runSource(kube, ns)));
    this.pods = new InformerSet(namespaces, (ns) => informer(podSource(kube, ns)));
    this.configMaps = new InformerSet(namespaces, (ns) => informer(configMapSource(kube, ns)));
    this.networkPolicies = new InformerSet(namespaces, (ns) => informer(networkPolicySource(kube, ns)));
    this.runtimeClasses = informer(runtimeClassSource(kube));
    this.wire();
    options.metrics.observe({ phaseCounts: () => this.phaseCounts(), queueDepth: () => this.queue.length });
  }

  private wire(): void {
    for (const i of this.runs.informers) {
      i.on((type, obj) => {
        const key = objectKey(obj);
        if (type === 'delete') this.overlay.forget(key);
        this.queue.add(key);
      });
    }
    const toOwner = (_type: string, obj: KubeObject): void => {
      const key = ownerKey(obj);
      if (key) this.queue.add(key);
    };
    for (const set of [this.pods, this.configMaps, this.networkPolicies] as InformerSet<KubeObject>[]) {
      for (const i of set.informers) i.on(toOwner);
    }
    // A RuntimeClass appearing (or going) matters to runs still waiting for their pod.
    this.runtimeClasses.on(() => {
      for (const run of this.runs.list()) {
        if ((run.status as { phase?: string } | undefined)?.phase !== 'Pending') continue;
        this.queue.add(objectKey(run));
      }
    });
  }

  private informers(): Informer<KubeObject>[] {
    return [
      ...this.runs.informers,
      ...this.pods.informers,
      ...this.configMaps.informers,
      ...this.networkPolicies.informers,
      this.runtimeClasses,
    ] as Informer<KubeObject>[];
  }

  private phaseCounts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const run of this.runs.list()) {
      const phase = (run.status as { phase?: string } | undefined)?.phase ?? '';
      counts.set(phase, (counts.get(phase) ?? 0) + 1);
    }
    return counts;
  }

  isReady(): boolean {
    return this.started;
  }

  /** The longest time any of its informers has been failing to list or watch (ms). */
  failingMs(): number {
    return Math.max(0, ...this.informers().map((i) => i.failingMs()));
  }

  /**
   * Pauses (false) or resumes (true) the workers. Paused, they take no new key (in-flight passes
   * finish) while the informers keep the caches current; resuming re-queues every run.
   */
  setActive(active: boolean): void {
    if (this.active === active) return;
    this.active = active;
    if (!active) return;
    for (const wake of this.resumed.splice(0)) wake();
    for (const run of this.runs.list()) this.queue.add(objectKey(run));
  }

  private whenActive(): Promise<void> {
    if (this.active || this.stopper.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => this.resumed.push(resolve));
  }

  /** Starts the informers, waits for their first lists, then starts the workers. */
  async start(): Promise<void> {
    const { logger } = this.options;
    for (const i of this.informers()) i.start();
    while (!this.informers().every((i) => i.hasSynced())) {
      await sleep(100, this.stopper.signal).catch(() => undefined);
      if (this.stopper.signal.aborted) return;
    }
    logger.info({ runs: this.runs.list().length, namespaces: this.options.namespaces }, 'Synced caches');
    const deps = this.deps();
    this.workers = Array.from({ length: this.options.workers }, () => this.work(deps));
    this.resync = setInterval(() => {
      for (const run of this.runs.list()) this.queue.add(objectKey(run));
    }, this.options.resyncSeconds * 1000);
    this.started = true;
  }

  /** Stops taking work, lets in-flight passes finish, stops the watches. */
  async stop(): Promise<void> {
    this.stopper.abort();
    for (const wake of this.resumed.splice(0)) wake();
    clearInterval(this.resync);
    this.queue.shutDown();
    await Promise.all(this.workers);
    await Promise.all(this.informers().map((i) => i.stop()));
    this.started = false;
  }

  private deps(): ReconcileDeps {
    const o = this.options;
    const now = o.now ?? (() => new Date());
    return {
      kube: o.kube,
      runs: this.runs,
      pods: this.pods,
      configMaps: this.configMaps,
      networkPolicies: this.networkPolicies,
      runtimeClasses: this.runtimeClasses,
      events: createEventRecorder({ kube: o.kube, logger: o.logger, instance: o.instance, now }),
      metrics: o.metrics,
      logger: o.logger,
      overlay: this.overlay,
      policy: o.policy,
      pod: o.pod,
      output: o.output,
      runSettings: o.runSettings,
      now,
    };
  }

  private async work(deps: ReconcileDeps): Promise<void> {
    const { metrics, logger } = this.options;
    for (;;) {
      await this.whenActive();
      const key = await this.queue.get();
      if (key === undefined) return;
      if (!this.active) {
        // Paused while waiting: hand the key back; it is taken again on resume.
        this.queue.done(key);
        this.queue.add(key);
        continue;
      }
      const started = performance.now();
      let result = 'success';
      try {
        const { requeueAfterMs } = await reconcileRun(deps, key);
        this.queue.forget(key);
        if (requeueAfterMs !== undefined) {
          result = 'requeue';
          this.queue.addAfter(key, requeueAfterMs + 50);
        }
      } catch (e) {
        result = isConflict(e) ? 'conflict' : 'error';
        const delay = this.queue.addRateLimited(key);
        const fields = { run: key, err: (e as Error).message, retryInMs: delay };
        if (result === 'conflict') logger.debug(fields, 'Reconcile hit a conflict; retrying');
        else logger.warn(fields, 'Reconcile failed; retrying');
      } finally {
        metrics.reconciles.inc({ result });
        metrics.reconcileDuration.observe({ result }, (performance.now() - started) / 1000);
        this.queue.done(key);
      }
    }
  }
}
