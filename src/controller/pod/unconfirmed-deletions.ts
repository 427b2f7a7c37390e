/**
 * Forces the deletion of an operator-made pod that the kubelet has not confirmed FORCE_DELETE_AFTER_MS
 * after its grace period, whoever deleted it: its owner's pass, the garbage collector after its owner
 * went, or a user. A busy kubelet can take minutes to confirm, and a v1.20 kubelet whose container
 * was removed before it was killed never does (kubernetes/kubernetes#106734). The pod object would
 * stay terminating, and a deleted sandbox must be gone promptly. Only the leader forces.
 */
import { isNotFound } from '../../kube/errors.js';
import type { KubeClient } from '../../kube/client.js';
import type { Pod } from '../../kube/objects.js';
import type { Store } from '../../kube/store.js';
import type { Logger } from '../../observability/logger.js';
import { FORCE_DELETE_AFTER_MS, forceDeletionInMs } from './pod-stop.js';

export interface UnconfirmedDeletionsDeps {
  kube: KubeClient;
  pods: Store<Pod>;
  logger: Logger;
  now: () => Date;
  /** Whether this operator acts (started and leading). */
  acting: () => boolean;
}

export class UnconfirmedDeletions {
  /** One timer per pod being deleted, by its UID. */
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly deps: UnconfirmedDeletionsDeps;

  constructor(deps: UnconfirmedDeletionsDeps) {
    this.deps = deps;
  }

  /** A pod event from the informer: a pod being deleted gets a timer; one gone loses it. */
  observe(type: 'add' | 'update' | 'delete', pod: Pod): void {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    if (type === 'delete') return this.clear(uid);
    const inMs = forceDeletionInMs(pod, this.deps.now());
    if (inMs === undefined || this.timers.has(uid)) return;
    this.schedule(pod, inMs);
  }

  stop(): void {
    for (const uid of [...this.timers.keys()]) this.clear(uid);
  }

  private clear(uid: string): void {
    clearTimeout(this.timers.get(uid));
    this.timers.delete(uid);
  }

  private schedule(pod: Pod, inMs: number): void {
    const uid = pod.metadata?.uid ?? '';
    const timer = setTimeout(() => {
      this.timers.delete(uid);
      void this.force(pod.metadata?.namespace ?? '', pod.metadata?.name ?? '', uid);
    }, inMs);
    timer.unref();
    this.timers.set(uid, timer);
  }

  private async force(namespace: string, name: string, uid: string): Promise<void> {
    const { kube, pods, logger, acting } = this.deps;
    const pod = pods.get(namespace, name);
    if (pod?.metadata?.uid !== uid || !pod.metadata.deletionTimestamp) return;
    // A follower looks again later: it may lead by then.
    if (!acting()) return this.schedule(pod, FORCE_DELETE_AFTER_MS);
    try {
      await kube.deletePod(namespace, name, uid, 0);
      logger.warn(
        { pod: `${namespace}/${name}`, deletionTimestamp: pod.metadata.deletionTimestamp },
        'Forced the deletion of a Pod the kubelet did not confirm',
      );
    } catch (e) {
      if (isNotFound(e)) return;
      logger.warn(
        { pod: `${namespace}/${name}`, err: (e as Error).message },
        'Could not force a Pod deletion',
      );
      this.schedule(pod, FORCE_DELETE_AFTER_MS);
    }
  }
}
