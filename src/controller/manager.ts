/**
 * The controller manager: one set of informers for every kind it reconciles and for the children
 * the operator makes, one work queue and N workers per kind, pause and resume (leader election),
 * a periodic resync, and the routing of child events to the key of their controlling owner, by
 * the owner reference's kind. Requeue hints and failures come back as timed adds. start() returns
 * once the caches are synced and the workers run; stop() drains in-flight passes.
 */
import type { KubeClient } from '../kube/client.js';
import { isConflict } from '../kube/errors.js';
import { Informer, InformerSet, type InformerSource } from '../kube/informer.js';
import { NAMESPACE_DENY_ALL_POLICY } from '../api/v1alpha1/labels.js';
import {
  objectKey,
  type ConfigMap,
  type KubeObject,
  type Lease,
  type NetworkPolicy,
  type Pod,
  type RuntimeClass,
} from '../kube/objects.js';
import type { Logger } from '../observability/logger.js';
import { pollUntil } from '../shared/time.js';
import { controllerOf, ownersOf } from './children.js';
import { createEventRecorder, type QueuedEventRecorder } from './events.js';
import type { KindController, ReconcileContext, Reconciler } from './kind-controller.js';
import type { OperatorMetrics } from './metrics.js';
import { ensureNamespacePolicy, NamespacePolicies } from './pod/namespace-policy.js';
import { UnconfirmedDeletions } from './pod/unconfirmed-deletions.js';
import {
  configMapSource,
  kindSource,
  leaseSource,
  networkPolicySource,
  podSource,
  runtimeClassSource,
} from './sources.js';
import { WorkQueue } from './workqueue.js';

export interface ManagerOptions {
  kube: KubeClient;
  logger: Logger;
  metrics: OperatorMetrics;
  /** Namespaces to watch; empty means all. */
  namespaces: readonly string[];
  /** Workers per kind. */
  workers: number;
  watchTimeoutSeconds: number;
  resyncSeconds: number;
  /** Identity in Events (reportingInstance). */
  instance: string;
  now?: () => Date;
}

/** One kind as the manager runs it. */
interface Managed {
  controller: KindController<KubeObject>;
  objects: InformerSet<KubeObject>;
  queue: WorkQueue;
  reconciler: Reconciler;
}

/** How often start() looks whether every cache has synced. */
const SYNC_POLL_MS = 100;

export class Manager {
  private readonly options: ManagerOptions;
  private readonly kinds: Managed[];
  private readonly events: QueuedEventRecorder;
  private readonly pods: InformerSet<Pod>;
  private readonly configMaps: InformerSet<ConfigMap>;
  private readonly networkPolicies: InformerSet<NetworkPolicy>;
  private readonly leases: InformerSet<Lease>;
  private readonly runtimeClasses: Informer<RuntimeClass>;
  private readonly namespacePolicies = new NamespacePolicies();
  private readonly unconfirmedDeletions: UnconfirmedDeletions;
  private workers: Promise<void>[] = [];
  private resync: NodeJS.Timeout | undefined;
  private started = false;
  private active = true;
  private resumed: (() => void)[] = [];
  private readonly stopper = new AbortController();

  constructor(options: ManagerOptions, kinds: readonly KindController<KubeObject>[]) {
    this.options = options;
    const { kube, namespaces } = options;
    const set = <T extends KubeObject>(source: (ns: string | undefined) => InformerSource<T>) =>
      new InformerSet<T>(namespaces, (ns) => this.informer(source(ns)));
    this.pods = set((ns) => podSource(kube, ns));
    this.configMaps = set((ns) => configMapSource(kube, ns));
    this.networkPolicies = set((ns) => networkPolicySource(kube, ns));
    this.leases = set((ns) => leaseSource(kube, ns));
    this.runtimeClasses = this.informer(runtimeClassSource(kube));
    this.unconfirmedDeletions = new UnconfirmedDeletions({
      kube,
      pods: this.pods,
      logger: options.logger,
      now: this.now,
      acting: () => this.acting(),
    });
    const events = (this.events = createEventRecorder({
      kube,
      logger: options.logger,
      instance: options.instance,
      now: this.now,
    }));
    this.kinds = kinds.map((controller) => {
      const objects = set((ns) => kindSource<KubeObject>(kube, controller.kind, ns));
      const queue = new WorkQueue({ baseDelayMs: 200, maxDelayMs: 60_000 });
      const context: ReconcileContext<KubeObject> = {
        kube,
        logger: options.logger,
        metrics: options.metrics,
        events,
        now: this.now,
        objects,
        pods: this.pods,
        configMaps: this.configMaps,
        networkPolicies: this.networkPolicies,
        runtimeClasses: this.runtimeClasses,
        leases: this.leases,
        requeue: (key) => queue.add(key),
        namespacePolicies: this.namespacePolicies,
      };
      return { controller, objects, queue, reconciler: controller.reconciler(context) };
    });
    this.wire();
    options.metrics.observeQueueDepth(() => this.kinds.reduce((n, k) => n + k.queue.length, 0));
  }

  private readonly now = (): Date => (this.options.now ?? (() => new Date()))();

  private informer<T extends KubeObject>(source: InformerSource<T>): Informer<T> {
    const { kube, logger, watchTimeoutSeconds, metrics } = this.options;
    return new Informer<T>(kube, source, {
      logger,
      watchTimeoutSeconds,
      onRestart: (reason) => metrics.watchRestarts.inc({ resource: source.resource, reason }),
    });
  }

  private wire(): void {
    for (const k of this.kinds) {
      for (const i of k.objects.informers) {
        i.on((type, obj) => {
          const key = objectKey(obj);
          if (type === 'delete') k.reconciler.forget?.(key);
          k.queue.add(key);
        });
      }
    }
    const childChanged = (k: Managed, key: string): void =>
      k.queue.addAfter(key, k.controller.childEventDelayMs ?? 0);
    const enqueue = (owner: { apiVersion: string; kind: string; key: string } | undefined): void => {
      const k =
        owner &&
        this.kinds.find(
          (m) => m.controller.kind.apiVersion === owner.apiVersion && m.controller.kind.kind === owner.kind,
        );
      if (owner && k) childChanged(k, owner.key);
    };
    for (const set of [this.pods, this.configMaps, this.networkPolicies] as InformerSet<KubeObject>[]) {
      for (const i of set.informers) i.on((_type, obj) => enqueue(controllerOf(obj)));
    }
    for (const i of this.pods.informers) {
      i.on((type, pod) => {
        for (const k of this.kinds)
          for (const key of k.reconciler.keysForPod?.(pod) ?? []) childChanged(k, key);
        if (this.acting()) for (const k of this.kinds) k.reconciler.observePod?.(type, pod);
        this.unconfirmedDeletions.observe(type, pod);
      });
    }
    for (const i of this.networkPolicies.informers) {
      i.on((_type, obj) => {
        const namespace = obj.metadata?.namespace;
        if (obj.metadata?.name === NAMESPACE_DENY_ALL_POLICY && namespace)
          this.restoreNamespacePolicy(namespace);
      });
    }
    // A session Lease is owned by its Sandbox, but not as its controller (the gateway writes it).
    for (const i of this.leases.informers) i.on((_type, obj) => ownersOf(obj).forEach(enqueue));
    this.runtimeClasses.on(() => {
      for (const k of this.kinds)
        for (const key of k.reconciler.waitingForRuntimeClasses?.() ?? []) k.queue.add(key);
    });
  }

  /** The namespace's deny-all policy changed or went: look at it again, and restore it (leader only). */
  private restoreNamespacePolicy(namespace: string): void {
    this.namespacePolicies.forget(namespace);
    if (!this.started || !this.active) return;
    const { kube, logger } = this.options;
    const deps = {
      kube,
      logger,
      networkPolicies: this.networkPolicies,
      namespacePolicies: this.namespacePolicies,
    };
    void ensureNamespacePolicy(deps, namespace).catch((e: unknown) =>
      logger.warn(
        { namespace, err: (e as Error).message },
        'Could not restore the namespace deny-all NetworkPolicy',
      ),
    );
  }

  private informers(): Informer<KubeObject>[] {
    return [
      ...this.kinds.flatMap((k) => k.objects.informers),
      ...this.pods.informers,
      ...this.configMaps.informers,
      ...this.networkPolicies.informers,
      ...this.leases.informers,
      this.runtimeClasses,
    ] as Informer<KubeObject>[];
  }

  /** Adds every object of every kind to its queue. */
  private requeueAll(): void {
    for (const k of this.kinds) for (const obj of k.objects.list()) k.queue.add(objectKey(obj));
  }

  isReady(): boolean {
    return this.started;
  }

  /** Started and leading: what the reconcilers' own activity (observePod, setActive) follows. */
  private acting(): boolean {
    return this.started && this.active && !this.stopper.signal.aborted;
  }

  private tellActive(): void {
    const acting = this.acting();
    for (const k of this.kinds) k.reconciler.setActive?.(acting);
  }

  /** The longest time any of its informers has been failing to list or watch (ms). */
  failingMs(): number {
    return Math.max(0, ...this.informers().map((i) => i.failingMs()));
  }

  /**
   * Pauses (false) or resumes (true) the workers. Paused, they take no new key (in-flight passes
   * finish) while the informers keep the caches current; resuming re-queues every object.
   */
  setActive(active: boolean): void {
    if (this.active === active) return;
    this.active = active;
    this.tellActive();
    if (!active) return;
    for (const wake of this.resumed.splice(0)) wake();
    this.requeueAll();
  }

  private whenActive(): Promise<void> {
    if (this.active || this.stopper.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => this.resumed.push(resolve));
  }

  /** Starts the informers, waits for their first lists, then starts the workers. */
  async start(): Promise<void> {
    const informers = this.informers();
    for (const i of informers) i.start();
    const synced = await pollUntil(() => informers.every((i) => i.hasSynced()), {
      intervalMs: SYNC_POLL_MS,
      timeoutMs: Number.POSITIVE_INFINITY,
      signal: this.stopper.signal,
    });
    if (!synced) return;
    const counts = Object.fromEntries(
      this.kinds.map((k) => [k.controller.kind.plural, k.objects.list().length]),
    );
    this.options.logger.info({ ...counts, namespaces: this.options.namespaces }, 'Synced caches');
    this.workers = this.kinds.flatMap((k) =>
      Array.from({ length: this.options.workers }, () => this.work(k)),
    );
    this.resync = setInterval(() => this.requeueAll(), this.options.resyncSeconds * 1000);
    this.started = true;
    this.tellActive();
  }

  /** Stops taking work, lets in-flight passes finish, stops the watches. */
  async stop(): Promise<void> {
    this.stopper.abort();
    this.tellActive();
    for (const wake of this.resumed.splice(0)) wake();
    clearInterval(this.resync);
    this.unconfirmedDeletions.stop();
    for (const k of this.kinds) k.queue.shutDown();
    await Promise.all(this.workers);
    await this.events.flush();
    await Promise.all(this.informers().map((i) => i.stop()));
    this.started = false;
  }

  private async work(k: Managed): Promise<void> {
    for (;;) {
      await this.whenActive();
      const key = await k.queue.get();
      if (key === undefined) return;
      if (!this.active) {
        // Paused while waiting: hand the key back; it is taken again on resume.
        k.queue.done(key);
        k.queue.add(key);
        continue;
      }
      await this.pass(k, key);
    }
  }

  /** One reconcile of `key`, timed and counted; a requeue hint or a failure comes back as a timed add. */
  private async pass(k: Managed, key: string): Promise<void> {
    const { metrics, logger } = this.options;
    const started = performance.now();
    let result = 'success';
    try {
      const { requeueAfterMs } = await k.reconciler.reconcile(key);
      k.queue.forget(key);
      if (requeueAfterMs !== undefined) {
        result = 'requeue';
        k.queue.addAfter(key, requeueAfterMs + 50);
      }
    } catch (e) {
      result = isConflict(e) ? 'conflict' : 'error';
      const delay = k.queue.addRateLimited(key);
      const fields = { [k.controller.logField]: key, err: (e as Error).message, retryInMs: delay };
      if (result === 'conflict') logger.debug(fields, 'Reconcile hit a conflict; retrying');
      else logger.warn(fields, 'Reconcile failed; retrying');
    } finally {
      const kind = k.controller.kind.kind;
      metrics.reconciles.inc({ kind, result });
      metrics.reconcileDuration.observe({ kind, result }, (performance.now() - started) / 1000);
      k.queue.done(key);
    }
  }
}
