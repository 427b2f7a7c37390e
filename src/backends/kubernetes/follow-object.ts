/**
 * followObject(): follows one object by watch until the caller has seen what it waits for, on the
 * shared watch loop (src/kube/watch.ts), which re-watches, backs off and resyncs after a 410: here
 * a resync reads the object afresh. Refusals (401, 403, 404) that last are mapped by gatewayError()
 * and thrown; a short run of them is waited out like any failure, since a restarted apiserver
 * refuses for a moment what it allows (it answers before its RBAC caches are filled: seen here, a
 * 403 on the very SandboxRuns the gateway had just created).
 */
import type { KubeClient } from '../../kube/client.js';
import type { KubeObject } from '../../kube/objects.js';
import { watchLoop, type WatchEnd, type WatchRestart } from '../../kube/watch.js';
import { gatewayError, type CallContext } from './errors.js';

/** What the caller of a follow gives. */
export interface Following<T> {
  /** The resourceVersion to watch from (the object's as last read); undefined reads it first. */
  resourceVersion: string | undefined;
  /** Sees each version of the object; returns true when following can stop. */
  onObject(obj: T): boolean;
  watchTimeoutSeconds: number;
  signal: AbortSignal;
  /** Told each time the watch is re-opened, and why (a 410 Gone is `expired`: the object was read afresh). */
  onRestart?(restart: WatchRestart): void;
}

export interface FollowOptions<T> extends Following<T> {
  /** The object's collection (`/api/v1/namespaces/ns/pods`) and name. */
  path: string;
  name: string;
  /** Reads the object; undefined when it is gone. */
  get(): Promise<T | undefined>;
  /** For mapping refusals. */
  context: CallContext;
  /** How long refusals in a row are retried before they are thrown (REFUSAL_GRACE_MS). */
  refusalGraceMs?: number;
}

/** How following ended: the caller saw what it waited for, the object was deleted, or the signal aborted. */
export type FollowEnd = 'seen' | 'deleted' | 'aborted';

const REFUSED = new Set([401, 403, 404]);
/**
 * Refusals in a row are retried this long: well past an apiserver's start (its RBAC caches fill
 * within a second), well short of a run's pickup timeout, so that a refusal that lasts is still
 * reported as one, not as a run that never ended.
 */
export const REFUSAL_GRACE_MS = 10_000;

export async function followObject<T extends KubeObject>(
  kube: Pick<KubeClient, 'watch'>,
  o: FollowOptions<T>,
): Promise<FollowEnd> {
  const grace = o.refusalGraceMs ?? REFUSAL_GRACE_MS;
  // Since when every attempt has been refused (undefined once one is not).
  let refusedSince: number | undefined;
  const seen = (obj: T): WatchEnd<'seen'> | undefined => {
    refusedSince = undefined;
    return o.onObject(obj) ? { end: 'seen' } : undefined;
  };
  try {
    const end = await watchLoop<T, 'seen' | 'deleted'>(kube, {
      target: { path: o.path, fieldSelector: `metadata.name=${o.name}` },
      timeoutSeconds: o.watchTimeoutSeconds,
      resourceVersion: o.resourceVersion,
      resync: async () => {
        const obj = await o.get();
        if (!obj) return { end: 'deleted' };
        return seen(obj) ?? obj.metadata?.resourceVersion ?? '';
      },
      onEvent: (type, obj) => (type === 'DELETED' ? { end: 'deleted' } : seen(obj)),
      signal: o.signal,
      isFatal: (err) => {
        if (!REFUSED.has(err.status)) {
          refusedSince = undefined;
          return false;
        }
        refusedSince ??= Date.now();
        return Date.now() - refusedSince >= grace;
      },
      onRestart: (restart) => {
        if (restart.reason !== 'error') refusedSince = undefined;
        o.onRestart?.(restart);
      },
    });
    return end ?? 'aborted';
  } catch (e) {
    throw gatewayError(e, o.context);
  }
}
