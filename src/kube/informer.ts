/**
 * A list-watch cache that keeps going: client-node's own informer stops for good on any error and
 * has no watch timeout (notes/libraries.md §1.4), so this one is written out:
 * - list (paged), then watch from the list's resourceVersion with a server-side timeout and bookmarks;
 * - a clean close re-watches from the last resourceVersion; a 410 (HTTP or in-stream) re-lists;
 * - any other failure re-lists or re-watches after an exponential backoff, forever, until stop();
 * - a watchdog aborts a watch that has been silent past its timeout (a half-open connection).
 * Every cached object is plain JSON, keyed `namespace/name`.
 */
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.js';
import { sleep } from '../shared/abort.js';
import type { KubeObject, ListPage } from './client.js';
import { isGone, toKubeError } from './errors.js';

export type InformerEventType = 'add' | 'update' | 'delete';
export type WatchRestartReason = 'closed' | 'expired' | 'error' | 'stalled';

export interface InformerSource<T> {
  /** Resource name for logs and metrics, e.g. `pods`. */
  resource: string;
  /** Collection path to watch, e.g. `/api/v1/namespaces/ns/pods`. */
  path: string;
  labelSelector?: string | undefined;
  list(continueToken: string | undefined): Promise<ListPage<T>>;
}

export interface InformerOptions {
  kc: KubeConfig;
  logger: Logger;
  /** Server-side watch timeout; each watch asks for a random value in [t, 1.5 t). */
  watchTimeoutSeconds: number;
  backoff?: { initialMs: number; maxMs: number };
  onRestart?: (reason: WatchRestartReason) => void;
}

type Listener<T> = (type: InformerEventType, obj: T) => void;

export function objectKey(obj: KubeObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

interface WatchEvent<T> {
  type: string;
  object: T & { code?: number; message?: string };
}

/** Keeps an error's statusCode (HTTP 410 and friends) while making it an Error. */
function asError(e: unknown): Error {
  return e instanceof Error
    ? e
    : Object.assign(new Error(String(e)), { statusCode: (e as { statusCode?: unknown } | null)?.statusCode });
}

export class Informer<T extends KubeObject> {
  private readonly source: InformerSource<T>;
  private readonly options: InformerOptions;
  private readonly objects = new Map<string, T>();
  private readonly listeners: Listener<T>[] = [];
  private resourceVersion = '';
  private synced = false;
  private stopper: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private lastActivity = 0;
  /** When the current run of failed lists/watches began; undefined while healthy. */
  private failingSince: number | undefined;

  constructor(source: InformerSource<T>, options: InformerOptions) {
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

  /** Milliseconds since the last list or watch event (bookmarks included). */
  idleMs(now = Date.now()): number {
    return now - this.lastActivity;
  }

  /** Milliseconds this informer has been failing to list or watch (0 while it works). */
  failingMs(now = Date.now()): number {
    return this.failingSince === undefined ? 0 : now - this.failingSince;
  }

  start(): void {
    if (this.loop) return;
    this.stopper = new AbortController();
    this.loop = this.run(this.stopper.signal);
  }

  async stop(): Promise<void> {
    this.stopper?.abort();
    await this.loop;
    this.loop = undefined;
  }

  private async run(signal: AbortSignal): Promise<void> {
    const { initialMs, maxMs } = this.options.backoff ?? { initialMs: 250, maxMs: 30_000 };
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (this.resourceVersion === '') await this.relist();
        const started = Date.now();
        const reason = await this.watchOnce(signal);
        if (signal.aborted) break;
        if (reason === 'expired') this.resourceVersion = '';
        this.restarted(reason);
        // A watch the server ends at once is a failure too: never re-watch in a tight loop.
        failures = Date.now() - started < 1000 ? failures + 1 : 0;
        if (failures === 0) this.failingSince = undefined;
      } catch (e) {
        if (signal.aborted) break;
        const err = toKubeError(e, `watch ${this.source.resource}`);
        if (isGone(err)) {
          this.resourceVersion = '';
          this.restarted('expired');
          continue;
        }
        failures++;
        this.failingSince ??= Date.now();
        this.options.logger.warn(
          { resource: this.source.resource, err: err.message, failures },
          'Watch failed; retrying',
        );
        this.restarted('error');
      }
      if (failures > 0) {
        const delay = Math.min(maxMs, initialMs * 2 ** (failures - 1)) * (0.5 + Math.random() / 2);
        await sleep(delay, signal).catch(() => undefined);
      }
    }
  }

  private restarted(reason: WatchRestartReason): void {
    if (reason !== 'closed')
      this.options.logger.info({ resource: this.source.resource, reason }, 'Restarted watch');
    this.options.onRestart?.(reason);
  }

  private async relist(): Promise<void> {
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
    this.resourceVersion = resourceVersion;
    this.lastActivity = Date.now();
    this.failingSince = undefined;
    this.synced = true;
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

  /** One watch; resolves with why it ended, or rejects (HTTP errors carry statusCode). */
  private watchOnce(signal: AbortSignal): Promise<WatchRestartReason> {
    const timeout = this.options.watchTimeoutSeconds;
    const query: Record<string, string | number | boolean> = {
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: true,
      timeoutSeconds: Math.floor(timeout * (1 + Math.random() / 2)),
    };
    if (this.source.labelSelector) query.labelSelector = this.source.labelSelector;
    return new Promise<WatchRestartReason>((resolve, reject) => {
      let request: AbortController | undefined;
      let settled = false;
      let watchdog: NodeJS.Timeout | undefined;
      const finish = (settle: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(watchdog);
        signal.removeEventListener('abort', onAbort);
        request?.abort();
        settle();
      };
      const arm = (): void => {
        clearTimeout(watchdog);
        // The server ends the watch after at most 1.5 × timeout; silence well past that means a dead connection.
        watchdog = setTimeout(() => finish(() => resolve('stalled')), (timeout * 1.5 + 30) * 1000);
      };
      const onAbort = (): void => finish(() => resolve('closed'));
      signal.addEventListener('abort', onAbort, { once: true });
      arm();
      const onEvent = (type: string, object: WatchEvent<T>['object']): void => {
        if (settled) return;
        this.lastActivity = Date.now();
        this.failingSince = undefined;
        arm();
        if (type === 'ERROR') {
          if (object.code === 410) finish(() => resolve('expired'));
          else
            finish(() =>
              reject(Object.assign(new Error(object.message ?? 'watch error'), { statusCode: object.code })),
            );
          return;
        }
        const rv = object.metadata?.resourceVersion;
        if (type === 'ADDED' || type === 'MODIFIED') this.upsert(object);
        else if (type === 'DELETED') {
          const key = objectKey(object);
          if (this.objects.delete(key)) this.emit('delete', object);
        }
        if (rv) this.resourceVersion = rv;
      };
      const onDone = (err: unknown): void => finish(() => (err ? reject(asError(err)) : resolve('closed')));
      new Watch(this.options.kc).watch(this.source.path, query, onEvent, onDone).then(
        (controller) => {
          request = controller;
          if (settled) controller.abort();
        },
        (e: unknown) => finish(() => reject(asError(e))),
      );
    });
  }
}
