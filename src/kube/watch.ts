/**
 * The one watch loop. Every list-watch cache (informer.ts) and every follower of one object
 * (the gateway's) runs it; client-node's Watch opens one stream and reports its end, keeping it
 * open is ours (notes/libraries.md §1.4):
 * - each watch asks the server to end it after a random time in [t, 1.5 t), so re-watches spread
 *   out; a clean end re-watches from the last resourceVersion seen (bookmarks included);
 * - 410 Gone (HTTP or in-stream) means that version is too old: the caller resyncs (re-lists, or
 *   reads its object afresh) and the loop watches from the version it read;
 * - a watch still open STALL_SLACK_MS past the timeout it asked for is a half-open connection:
 *   it is aborted and re-opened;
 * - any other failure, and a watch the server ends within a second, is retried after the shared
 *   backoff, forever, unless the caller calls the failure fatal; the signal stops it all.
 */
import { backoffDelay, type BackoffOptions } from '../shared/backoff.js';
import { onAbort, sleep } from '../shared/abort.js';
import type { KubeClient, WatchTarget } from './client.js';
import { isGone, toKubeError, type KubeApiError } from './errors.js';
import type { KubeObject } from './objects.js';

/**
 * Between failed watches: quick enough that a run in flight sees a restarted apiserver within
 * seconds, slow enough that the operator's nine watches and every followed run cost the apiserver
 * a request every few seconds each while it is down; jittered so they do not come back at once.
 */
export const WATCH_BACKOFF: BackoffOptions = { initialMs: 250, maxMs: 10_000, jitter: true };
/** How long past its server-side timeout a watch may stay open before it counts as stalled. */
export const STALL_SLACK_MS = 30_000;
/** A watch the server ends sooner than this counts as a failure (never re-watch in a tight loop). */
const QUICK_END_MS = 1000;

export type WatchRestartReason = 'closed' | 'expired' | 'error' | 'stalled';

export interface WatchRestart {
  reason: WatchRestartReason;
  /** The failure, for `error`. */
  err?: KubeApiError | undefined;
  /** Failed watches in a row (the backoff's attempt), 0 when the last one went well. */
  failures: number;
}

/** Ends the loop with a value (a follower saw what it waited for, or its object is gone). */
export interface WatchEnd<E> {
  end: E;
}

export interface WatchLoopOptions<T, E> {
  target: WatchTarget;
  /** The server-side timeout t of each watch, in seconds. */
  timeoutSeconds: number;
  /** Where to start watching; undefined resyncs first. */
  resourceVersion?: string | undefined;
  /** Reads the current state (first, and after 410 Gone): the resourceVersion to watch from. */
  resync(): Promise<string | WatchEnd<E>>;
  onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: T): WatchEnd<E> | undefined;
  signal: AbortSignal;
  /** A failure that retrying cannot fix: the loop rejects with it. */
  isFatal?(err: KubeApiError): boolean;
  /** Told each time a watch is re-opened, and why. */
  onRestart?(restart: WatchRestart): void;
}

type Outcome<E> = WatchEnd<E> | { restart: WatchRestartReason; err?: KubeApiError };

const failed = (err: KubeApiError): { restart: WatchRestartReason; err?: KubeApiError } =>
  isGone(err) ? { restart: 'expired' } : { restart: 'error', err };

/** The failures in a row after a watch that ended so, `ms` after it was opened. Pure. */
export function failuresAfter(failures: number, reason: WatchRestartReason, ms: number): number {
  return reason === 'error' || ms < QUICK_END_MS ? failures + 1 : 0;
}

/** Runs until a resync or an event ends it (resolves with its value), or the signal aborts (undefined). */
export async function watchLoop<T extends KubeObject, E>(
  kube: Pick<KubeClient, 'watch'>,
  o: WatchLoopOptions<T, E>,
): Promise<E | undefined> {
  let resourceVersion = o.resourceVersion;
  let failures = 0;
  while (!o.signal.aborted) {
    let outcome: Outcome<E>;
    let opened = Date.now();
    try {
      if (resourceVersion === undefined) {
        const read = await o.resync();
        if (typeof read !== 'string') return read.end;
        resourceVersion = read;
      }
      opened = Date.now();
      outcome = await watchOnce(kube, o, resourceVersion, (rv) => (resourceVersion = rv));
    } catch (e) {
      outcome = failed(toKubeError(e, `watch ${o.target.path}`));
    }
    if ('end' in outcome) return outcome.end;
    if (o.signal.aborted) break;
    if (outcome.err && o.isFatal?.(outcome.err)) throw outcome.err;
    if (outcome.restart === 'expired') resourceVersion = undefined;
    failures = failuresAfter(failures, outcome.restart, Date.now() - opened);
    o.onRestart?.({ reason: outcome.restart, err: outcome.err, failures });
    if (failures > 0) await sleep(backoffDelay(failures, WATCH_BACKOFF), o.signal).catch(() => undefined);
  }
  return undefined;
}

/** One watch from `resourceVersion`; resolves with why it ended (never rejects). */
function watchOnce<T extends KubeObject, E>(
  kube: Pick<KubeClient, 'watch'>,
  o: WatchLoopOptions<T, E>,
  resourceVersion: string,
  seen: (resourceVersion: string) => void,
): Promise<Outcome<E>> {
  const timeoutSeconds = Math.floor(o.timeoutSeconds * (1 + Math.random() / 2));
  return new Promise<Outcome<E>>((resolve) => {
    let settled = false;
    let request: AbortController | undefined;
    const finish = (outcome: Outcome<E>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(stall);
      detach();
      request?.abort();
      resolve(outcome);
    };
    const stall = setTimeout(() => finish({ restart: 'stalled' }), timeoutSeconds * 1000 + STALL_SLACK_MS);
    const detach = onAbort(o.signal, () => finish({ restart: 'closed' }));
    kube
      .watch<T>(
        o.target,
        { resourceVersion, timeoutSeconds },
        {
          onEvent: (type, obj) => {
            if (settled) return;
            const end = type === 'BOOKMARK' ? undefined : o.onEvent(type, obj);
            const rv = obj.metadata?.resourceVersion;
            if (rv) seen(rv);
            if (end) finish(end);
          },
          onDone: (err) => finish(err ? failed(err) : { restart: 'closed' }),
        },
      )
      .then(
        (controller) => {
          request = controller;
          if (settled) controller.abort();
        },
        (e: unknown) => finish(failed(toKubeError(e, `watch ${o.target.path}`))),
      );
  });
}
