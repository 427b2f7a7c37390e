/**
 * Follows one object by watch until the caller has seen what it waits for. client-node's Watch
 * needs help to be relied on (notes/libraries.md §1.4), so this loop:
 * - re-watches from the last resourceVersion when the server closes the stream (its timeout);
 * - on 410 Gone (in-stream or HTTP) reads the object afresh and watches from there;
 * - aborts a watch that outlives its server-side timeout (a half-open connection) and re-watches;
 * - retries other failures with a backoff, except refusals (401, 403, 404), which are mapped and thrown.
 */
import { onAbort, sleep } from '../../shared/abort.js';
import { AppError } from '../../shared/errors.js';
import { gatewayError, statusOf, type CallContext } from './errors.js';
import type { WatchEventType, WatchHandlers } from './run-api.js';

export interface Watched {
  metadata?: { resourceVersion?: string };
}

export interface FollowOptions<T extends Watched> {
  /** Opens one watch of the object from `resourceVersion`. */
  watch(
    resourceVersion: string | undefined,
    timeoutSeconds: number,
    handlers: WatchHandlers<T>,
  ): Promise<AbortController>;
  /** Reads the object (after a 410); undefined when it is gone. */
  get(): Promise<T | undefined>;
  /** Sees each version of the object; returns true when following can stop. */
  onObject(obj: T): boolean;
  resourceVersion: string | undefined;
  watchTimeoutSeconds: number;
  /** For mapping refusals. */
  context: CallContext;
  signal: AbortSignal;
  backoff?: { initialMs: number; maxMs: number };
}

/** How following ended: the caller saw what it waited for, the object was deleted, or the signal aborted. */
export type FollowEnd = 'seen' | 'deleted' | 'aborted';

type WatchEnd =
  { kind: 'seen' | 'deleted' | 'closed' | 'gone' | 'aborted' } | { kind: 'error'; err: unknown };

const REFUSED = new Set([401, 403, 404]);
/** Extra time a watch may run past its server-side timeout before it counts as stalled. */
const STALL_SLACK_MS = 15_000;

export async function followObject<T extends Watched>(o: FollowOptions<T>): Promise<FollowEnd> {
  const { initialMs, maxMs } = o.backoff ?? { initialMs: 250, maxMs: 5000 };
  let resourceVersion = o.resourceVersion;
  let failures = 0;
  const see = (obj: T): void => {
    resourceVersion = obj.metadata?.resourceVersion ?? resourceVersion;
  };
  while (!o.signal.aborted) {
    const end = await watchOnce(o, resourceVersion, see);
    if (end.kind === 'seen' || end.kind === 'deleted' || end.kind === 'aborted') return end.kind;
    let err = end.kind === 'error' ? end.err : undefined;
    if (end.kind === 'gone') {
      try {
        const obj = await o.get();
        if (!obj) return 'deleted';
        see(obj);
        if (o.onObject(obj)) return 'seen';
        failures = 0;
      } catch (e) {
        if (e instanceof AppError && !e.retryable) throw e;
        err = e;
      }
    }
    if (err !== undefined) {
      if (!(err instanceof AppError) && REFUSED.has(statusOf(err))) throw gatewayError(err, o.context);
      failures++;
      try {
        await sleep(Math.min(maxMs, initialMs * 2 ** (failures - 1)), o.signal);
      } catch {
        return 'aborted';
      }
    } else if (end.kind === 'closed') {
      failures = 0;
    }
  }
  return 'aborted';
}

function watchOnce<T extends Watched>(
  o: FollowOptions<T>,
  resourceVersion: string | undefined,
  see: (obj: T) => void,
): Promise<WatchEnd> {
  return new Promise<WatchEnd>((resolve) => {
    let settled = false;
    let controller: AbortController | undefined;
    const finish = (end: WatchEnd): void => {
      if (settled) return;
      settled = true;
      clearTimeout(stalled);
      detach();
      controller?.abort();
      resolve(end);
    };
    const stalled = setTimeout(
      () => finish({ kind: 'closed' }),
      o.watchTimeoutSeconds * 1000 + STALL_SLACK_MS,
    );
    const detach = onAbort(o.signal, () => finish({ kind: 'aborted' }));
    const onEvent = (type: WatchEventType, obj: T): void => {
      if (settled) return;
      if (type === 'ERROR') {
        const status = obj as { code?: number; message?: string };
        if (status.code === 410) return finish({ kind: 'gone' });
        const err = Object.assign(new Error(status.message ?? 'watch error event'), {
          statusCode: status.code,
        });
        return finish({ kind: 'error', err });
      }
      see(obj);
      if (type === 'BOOKMARK') return;
      if (type === 'DELETED') return finish({ kind: 'deleted' });
      if (o.onObject(obj)) finish({ kind: 'seen' });
    };
    const onDone = (err: unknown): void => {
      if (err === undefined) return finish({ kind: 'closed' });
      finish(statusOf(err) === 410 ? { kind: 'gone' } : { kind: 'error', err });
    };
    o.watch(resourceVersion, o.watchTimeoutSeconds, { onEvent, onDone }).then(
      (c) => {
        controller = c;
        if (settled) c.abort();
      },
      (err: unknown) => finish({ kind: 'error', err }),
    );
  });
}
