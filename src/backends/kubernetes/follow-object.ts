/**
 * followObject(): follows one object by watch until the caller has seen what it waits for, on the
 * shared watch loop (src/kube/watch.ts), which re-watches, backs off and resyncs after a 410: here
 * a resync reads the object afresh. Refusals (401, 403, 404) cannot be waited out: they are mapped
 * by gatewayError() and thrown.
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
}

/** How following ended: the caller saw what it waited for, the object was deleted, or the signal aborted. */
export type FollowEnd = 'seen' | 'deleted' | 'aborted';

const REFUSED = new Set([401, 403, 404]);

export async function followObject<T extends KubeObject>(
  kube: Pick<KubeClient, 'watch'>,
  o: FollowOptions<T>,
): Promise<FollowEnd> {
  const seen = (obj: T): WatchEnd<'seen'> | undefined => (o.onObject(obj) ? { end: 'seen' } : undefined);
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
      isFatal: (err) => REFUSED.has(err.status),
      onRestart: o.onRestart,
    });
    return end ?? 'aborted';
  } catch (e) {
    throw gatewayError(e, o.context);
  }
}
