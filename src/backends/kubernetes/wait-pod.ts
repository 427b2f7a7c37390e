/**
 * waitPodStopped(): resolves once a run's pod no longer runs: gone, or (unless `absent` is asked
 * for) finished. A finished pod is kept for its log until the run's TTL deletes it; a cancelled
 * run's pod is deleted by the operator, and `absent` waits for that. Never throws: it reports
 * whether the pod was seen stopped within the time given (or before `signal` aborted).
 */
import type { Pod } from '../../kube/objects.js';
import type { RunApi } from './run-api.js';

export interface WaitPodOptions {
  namespace: string;
  pod: string;
  until: 'absent' | 'stopped';
  timeoutMs: number;
  watchTimeoutSeconds: number;
  /** Ends the wait early (the backend is closing): the pod is the operator's to remove. */
  signal?: AbortSignal;
}

const finished = (pod: Pod): boolean => pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';

export async function waitPodStopped(api: RunApi, o: WaitPodOptions): Promise<boolean> {
  const ref = { namespace: o.namespace, name: o.pod };
  const done = (pod: Pod): boolean => o.until === 'stopped' && finished(pod);
  try {
    const first = await api.getPod(ref);
    if (!first || done(first)) return true;
    const end = await api.followPod(ref, {
      resourceVersion: first.metadata?.resourceVersion,
      onObject: done,
      watchTimeoutSeconds: o.watchTimeoutSeconds,
      signal: o.signal
        ? AbortSignal.any([o.signal, AbortSignal.timeout(o.timeoutMs)])
        : AbortSignal.timeout(o.timeoutMs),
    });
    return end !== 'aborted';
  } catch {
    return false;
  }
}
