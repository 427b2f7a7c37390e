// Waiting on the cluster, driven by watches (no polling loops, no sleeps).
import { Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** What a watch event carries, as far as waiting reads it (watch events are plain JSON). */
export interface Watched {
  kind?: string;
  metadata?: { name?: string; namespace?: string };
}

/** What to watch: a collection path (e.g. `/api/v1/namespaces/ns/pods`), optionally narrowed. */
export interface WatchTarget {
  path: string;
  /** shorthand for fieldSelector metadata.name=<name> */
  name?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface WaitOptions {
  timeoutMs: number;
  /** used in the timeout message, e.g. "pod py to succeed" */
  description?: string;
  signal?: AbortSignal;
}

export class WaitTimeoutError extends Error {
  override name = 'WaitTimeoutError';
  readonly lastSeen: unknown;
  constructor(message: string, lastSeen: unknown) {
    super(message);
    this.lastSeen = lastSeen;
  }
}

const PERMANENT_HTTP = new Set([400, 401, 403, 404, 405, 422]);

/**
 * Resolve with the first object (from the target's watch) for which `predicate` returns true.
 * A watch without a resourceVersion first replays the current state as ADDED events, so an object
 * that already matches resolves at once; when the server ends the stream the watch is simply
 * re-opened the same way. Rejects on timeout (with the last object seen), on abort, when the
 * predicate throws, or when the watch itself is refused (403, 404, ...).
 */
export function waitFor<T extends Watched>(
  kc: KubeConfig,
  target: WatchTarget,
  predicate: (obj: T, type: WatchEventType) => boolean,
  opts: WaitOptions,
): Promise<T> {
  const description = opts.description ?? `${target.path}${target.name ? `/${target.name}` : ''} to match`;
  const watch = new Watch(kc);
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let controller: AbortController | undefined;
    let lastSeen: T | undefined;
    let lastError: unknown;

    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      controller?.abort();
      settle();
    };
    const timer = setTimeout(() => {
      const tail = lastError ? `; last watch error: ${describeError(lastError)}` : '';
      finish(() =>
        reject(
          new WaitTimeoutError(
            `timed out after ${opts.timeoutMs} ms waiting for ${description}; last seen: ${summarize(lastSeen)}${tail}`,
            lastSeen,
          ),
        ),
      );
    }, opts.timeoutMs);
    const onAbort = (): void => {
      const reason: unknown = opts.signal?.reason;
      finish(() => reject(reason instanceof Error ? reason : new Error(`aborted: ${String(reason)}`)));
    };
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    const query: Record<string, string | number | boolean> = {
      // the server closes the stream after this long; we then re-open it
      timeoutSeconds: Math.max(5, Math.min(300, Math.ceil(opts.timeoutMs / 1000) + 5)),
    };
    const fieldSelector = [target.name ? `metadata.name=${target.name}` : '', target.fieldSelector ?? '']
      .filter(Boolean)
      .join(',');
    if (fieldSelector) query.fieldSelector = fieldSelector;
    if (target.labelSelector) query.labelSelector = target.labelSelector;

    const start = (): void => {
      if (settled) return;
      watch
        .watch(
          target.path,
          query,
          (type: string, obj: T) => {
            if (settled) return;
            if (type === 'ERROR') {
              lastError = obj; // e.g. 410 Gone: the stream ends next and is re-opened without a resourceVersion
              return;
            }
            if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return;
            lastSeen = obj;
            let matched: boolean;
            try {
              matched = predicate(obj, type);
            } catch (e) {
              finish(() => reject(e instanceof Error ? e : new Error(String(e))));
              return;
            }
            if (matched) finish(() => resolve(obj));
          },
          (err: unknown) => {
            if (settled) return;
            const status = (err as { statusCode?: number } | null)?.statusCode;
            if (status !== undefined && PERMANENT_HTTP.has(status)) {
              finish(() =>
                reject(new Error(`watch ${target.path} refused: HTTP ${status} (${describeError(err)})`)),
              );
              return;
            }
            if (err) lastError = err;
            setTimeout(start, err ? 250 : 0);
          },
        )
        .then(
          (c) => {
            controller = c;
            if (settled) c.abort();
          },
          (e: unknown) => {
            lastError = e;
            if (!settled) setTimeout(start, 250);
          },
        );
    };
    start();
  });
}

/** Wait for one pod (by name) to satisfy `predicate`. */
export function waitForPod(
  kc: KubeConfig,
  namespace: string,
  name: string,
  predicate: (pod: V1Pod) => boolean,
  opts: WaitOptions,
): Promise<V1Pod> {
  return waitFor<V1Pod>(kc, { path: `/api/v1/namespaces/${namespace}/pods`, name }, (p) => predicate(p), {
    ...opts,
    description: opts.description ?? `pod ${namespace}/${name}`,
  });
}

/** Container waiting reasons that will not resolve on their own on this cluster (nothing can be pulled). */
export const STUCK_REASONS: ReadonlySet<string> = new Set([
  'ErrImageNeverPull',
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'CrashLoopBackOff',
]);

/** The pod reached Succeeded/Failed, or one of its containers is stuck (see STUCK_REASONS). */
export function podFinishedOrStuck(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return true;
  return stuckReason(pod) !== undefined;
}

export function stuckReason(pod: V1Pod): string | undefined {
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const s of statuses) {
    const reason = s.state?.waiting?.reason;
    if (reason && STUCK_REASONS.has(reason))
      return `${s.name}: ${reason}: ${s.state?.waiting?.message ?? ''}`;
  }
  return undefined;
}

export function podRunning(pod: V1Pod): boolean {
  return (
    pod.status?.phase === 'Running' && (pod.status.containerStatuses ?? []).every((c) => c.ready === true)
  );
}

/** A short, readable summary of an object for failure messages (pods get phase and container states). */
export function summarize(obj: unknown): string {
  if (obj === undefined || obj === null) return 'nothing';
  const o = obj as Watched & { status?: unknown };
  const head = `${o.kind ?? 'object'} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name ?? '?'}`;
  const text = JSON.stringify(o.status ?? {});
  return `${head} status=${text.length > 1500 ? `${text.slice(0, 1500)}…` : text}`;
}

function describeError(e: unknown): string {
  if (e instanceof Error) return e.message;
  try {
    return JSON.stringify(e);
  } catch {
    return String(e);
  }
}
