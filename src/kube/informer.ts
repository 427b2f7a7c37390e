/**
 * A list-watch cache that keeps going: client-node's own informer stops for good on any error and
 * has no watch timeout (notes/libraries.md §1.4), so this one runs the shared watch loop
 * (watch.ts): list (paged), then watch from the list's resourceVersion; a 410 re-lists, any other
 * failure retries after the backoff, until stop(). Every cached object is plain JSON, keyed
 * `namespace/name`.
 */
import type { Logger } from '../observability/logger.js';
import type { KubeClient, ListPage, WatchTarget } from './client.js';
import { objectKey, type KubeObject } from './objects.js';
import type { Store } from './store.js';
import { watchLoop, type WatchRestart, type WatchRestartReason } from './watch.js';

export type InformerEventType = 'add' | 'update' | 'delete';

export interface InformerSource<T> extends WatchTarget {
  /** Resource name for logs and metrics, e.g. `pods`. */
  resource: string;
  list(continueToken: string | undefined): Promise<ListPage<T>>;
}

export interface InformerOptions {
  logger: Logger;
  /** Server-side watch timeout; each watch asks for a random value in [t, 1.5 t). */
  watchTimeoutSeconds: number;
  onRestart?: (reason: WatchRestartReason) => void;
}

type Listener<T> = (type: InformerEventType, obj: T) => void;

export class Informer<T extends KubeObject> implements Store<T> {
  private readonly kube: Pick<KubeClient, 'watch'>;
  private readonly source: InformerSource<T>;
  private readonly options: InformerOptions;
  private readonly objects = new Map<string, T>();
  private readonly listeners: Listener<T>[] = [];
  private synced = false;
  private stopper: AbortController | undefined;
  private loop: Promise<unknown> | undefined;
  /** When the current run of failed lists/watches began; undefined while healthy. */
  private failingSince: number | undefined;

  constructor(kube: Pick<KubeClient, 'watch'>, source: InformerSource<T>, options: InformerOptions) {
    this.kube = kube;
    this.source = source;
    this.options = options;
  }

  on(listener: Listener<T>): void {
    this.listeners.push(listener);
  }

  get(namespace: string, name: string): T | undefined {
    return this.objects.get(`${namespace}/${name}`);
  }

  list(): T[] {
    return [...this.objects.values()];
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /** Milliseconds this informer has been failing to list or watch (0 while it works). */
  failingMs(now = Date.now()): number {
    return this.failingSince === undefined ? 0 : now - this.failingSince;
  }

  start(): void {
    if (this.loop) return;
    const stopper = new AbortController();
    this.stopper = stopper;
    this.loop = watchLoop<T, never>(this.kube, {
      target: this.source,
      timeoutSeconds: this.options.watchTimeoutSeconds,
      resync: () => this.relist(),
      onEvent: (type, obj) => this.apply(type, obj),
      signal: stopper.signal,
      onRestart: (restart) => this.restarted(restart),
    });
  }

  async stop(): Promise<void> {
    this.stopper?.abort();
    await this.loop;
    this.loop = undefined;
  }

  private restarted({ reason, err, failures }: WatchRestart): void {
    const { logger, onRestart } = this.options;
    if (err) {
      this.failingSince ??= Date.now();
      logger.warn({ resource: this.source.resource, err: err.message, failures }, 'Watch failed; retrying');
    } else {
      this.failingSince = undefined;
    }
    if (reason !== 'closed') logger.info({ resource: this.source.resource, reason }, 'Restarted watch');
    onRestart?.(reason);
  }

  /** Lists everything afresh (paged): what is gone is deleted, the rest upserted. */
  private async relist(): Promise<string> {
    const fresh = new Map<string, T>();
    let token: string | undefined;
    let resourceVersion: string;
    do {
      const page = await this.source.list(token);
      for (const item of page.items) fresh.set(objectKey(item), item);
      resourceVersion = page.resourceVersion;
      token = page.continueToken;
    } while (token);
    for (const [key, old] of this.objects) {
      if (!fresh.has(key)) {
        this.objects.delete(key);
        this.emit('delete', old);
      }
    }
    for (const obj of fresh.values()) this.upsert(obj);
    this.failingSince = undefined;
    this.synced = true;
    return resourceVersion;
  }

  private apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: T): undefined {
    this.failingSince = undefined;
    if (type !== 'DELETED') this.upsert(obj);
    else if (this.objects.delete(objectKey(obj))) this.emit('delete', obj);
    return undefined;
  }

  private upsert(obj: T): void {
    const key = objectKey(obj);
    const old = this.objects.get(key);
    if (old && old.metadata?.resourceVersion === obj.metadata?.resourceVersion) return;
    this.objects.set(key, obj);
    this.emit(old ? 'update' : 'add', obj);
  }

  private emit(type: InformerEventType, obj: T): void {
    for (const listener of this.listeners) listener(type, obj);
  }
}

/** One store over the informers of several namespaces (or one cluster-wide informer). */
export class InformerSet<T extends KubeObject> implements Store<T> {
  readonly informers: Informer<T>[];
  private readonly byNamespace: Map<string, Informer<T>>;

  constructor(namespaces: readonly string[], make: (ns: string | undefined) => Informer<T>) {
    const scopes = namespaces.length ? [...namespaces] : [undefined];
    this.informers = scopes.map(make);
    this.byNamespace = new Map(scopes.map((ns, i) => [ns ?? '*', this.informers[i]!]));
  }

  get(namespace: string, name: string): T | undefined {
    return (this.byNamespace.get(namespace) ?? this.byNamespace.get('*'))?.get(namespace, name);
  }

  list(): T[] {
    return this.informers.flatMap((i) => i.list());
  }

  hasSynced(): boolean {
    return this.informers.every((i) => i.hasSynced());
  }
}
