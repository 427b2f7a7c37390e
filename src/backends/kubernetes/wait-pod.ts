/**
 * waitPodStopped(): resolves once a run's pod no longer runs: gone, or (unless `absent` is asked
 * for) finished. A finished pod is kept for its log until the run's TTL deletes it; a cancelled
 * run's pod is deleted by the operator, and `absent` waits for that. Never throws: it reports
 * whether the pod was seen stopped within the time given.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { followObject } from './follow-object.js';
import type { RunApi } from './run-api.js';

export interface WaitPodOptions {
  namespace: string;
  pod: string;
  until: 'absent' | 'stopped';
  timeoutMs: number;
  watchTimeoutSeconds: number;
}

const finished = (pod: V1Pod): boolean => pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';

export async function waitPodStopped(api: RunApi, o: WaitPodOptions): Promise<boolean> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), o.timeoutMs);
  const done = (pod: V1Pod): boolean => o.until === 'stopped' && finished(pod);
  try {
    const first = await api.getPod(o.namespace, o.pod);
    if (!first || done(first)) return true;
    const end = await followObject<V1Pod>({
      watch: (rv, timeout, handlers) => api.watchPod(o.namespace, o.pod, rv, timeout, handlers),
      get: () => api.getPod(o.namespace, o.pod),
      onObject: done,
      resourceVersion: first.metadata?.resourceVersion,
      watchTimeoutSeconds: o.watchTimeoutSeconds,
      context: { verb: 'watch', resource: 'pods', namespace: o.namespace, server: api.server },
      signal: stop.signal,
    });
    return end !== 'aborted';
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
