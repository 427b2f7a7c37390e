/**
 * The SandboxPool controller: what the manager needs to keep pools of ready pods (issue 16). Its
 * reconciler is reconcilePool() over the manager's caches, with the pools this controller just
 * wrote (the status overlay) and its own writes to their pods the cache has not shown yet (the
 * expectations). A claimed pod is no longer controlled by its pool but keeps the pool's UID label:
 * its changes reach the pool by that label. It keeps sandpit_pool_pods.
 */
import { LABEL_POOL_UID } from '../../api/v1alpha1/labels.js';
import { SANDBOX_POOL, type SandboxPool } from '../../api/v1alpha1/sandboxpool.js';
import { objectKey } from '../../kube/objects.js';
import type { KindController } from '../kind-controller.js';
import { StatusOverlay } from '../status-overlay.js';
import { PoolExpectations } from './expectations.js';
import { FailureBackoff } from './failure-backoff.js';
import { reconcilePool, type PoolObservations, type PoolSettings } from './reconcile.js';

/**
 * A pool's pod changes are looked at together this long after the first: a claim's relabelling,
 * then the run's pod ending, make one pass (and at most one status write) instead of one each, and
 * that write does not share the apiserver with the claimed run's own job and result.
 */
const POD_CHANGES_GATHERED_MS = 200;

export function sandboxPoolController(settings: PoolSettings): KindController<SandboxPool> {
  return {
    kind: SANDBOX_POOL,
    logField: 'pool',
    childEventDelayMs: POD_CHANGES_GATHERED_MS,
    reconciler(context) {
      const pools = context.objects;
      const overlay = new StatusOverlay();
      const expectations = new PoolExpectations();
      const backoff = new FailureBackoff();
      const observed: PoolObservations = { counts: new Map(), createdAt: new Map() };
      context.metrics.observePoolPods(() => [...observed.counts.values()]);
      const deps = { ...context, settings, pools, overlay, expectations, backoff, observed };
      return {
        reconcile: (key) => reconcilePool(deps, key),
        forget: (key) => {
          overlay.forget(key);
          expectations.forget(key);
          backoff.forget(key);
          observed.counts.delete(key);
        },
        // A RuntimeClass appearing (or going) decides whether a pool may have pods.
        waitingForRuntimeClasses: () => pools.list().map(objectKey),
        keysForPod: (pod) => {
          const uid = pod.metadata?.labels?.[LABEL_POOL_UID];
          const namespace = pod.metadata?.namespace;
          if (!uid || !namespace) return [];
          const pool = pools.list().find((p) => p.metadata.uid === uid && p.metadata.namespace === namespace);
          return pool ? [objectKey(pool)] : [];
        },
      };
    },
  };
}
