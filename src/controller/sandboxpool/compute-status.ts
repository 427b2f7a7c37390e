/**
 * computePoolStatus(): a SandboxPool's status from its counts after this pass's writes. Pure: time
 * comes in as an argument. The conditions are those kstatus tools read, each with the generation:
 * - Ready: True when every wanted pod is ready (readyReplicas ≥ spec.replicas, none starting).
 * - Stalled: True when the pool cannot be served (the policy refuses its spec, or its RuntimeClass
 *   does not exist); `message` says why.
 * - Reconciling: True while pods are being made ready or removed (reason PodsFailing while its pods
 *   keep failing and creating backs off).
 */
import { setConditions } from '../../api/v1alpha1/conditions.js';
import type { SandboxPoolStatus } from '../../api/v1alpha1/sandboxpool.js';
import { compact } from '../../shared/compact.js';
import { kstatusConditions } from '../verdict.js';

export interface PoolCounts {
  ready: number;
  starting: number;
  claimed: number;
}

export interface PoolStatusInput {
  generation: number;
  current: SandboxPoolStatus;
  /** Why the pool has no pods, when it cannot have any. */
  stalled: { reason: string; message: string } | undefined;
  replicas: number;
  counts: PoolCounts;
  /** Passes in a row that found failed pods: creating backs off (failure-backoff.ts). */
  failures: number;
  selector: string;
  now: string;
}

function outcome(i: PoolStatusInput): { reason: string; message: string; ready: boolean } {
  if (i.stalled) return { ...i.stalled, ready: false };
  const { ready, starting } = i.counts;
  const message = `${ready} of ${i.replicas} pods ready${starting ? `, ${starting} starting` : ''}`;
  if (ready >= i.replicas && starting === 0) return { reason: 'PoolReady', message, ready: true };
  if (i.failures > 0)
    return {
      reason: 'PodsFailing',
      message: `${message}; pods keep failing (${i.failures} times): backing off`,
      ready: false,
    };
  return { reason: ready > i.replicas ? 'ScalingDown' : 'ScalingUp', message, ready: false };
}

export function computePoolStatus(i: PoolStatusInput): SandboxPoolStatus {
  const o = outcome(i);
  const conditions = setConditions(
    i.current.conditions ?? [],
    kstatusConditions({
      ready: o.ready,
      stalled: i.stalled !== undefined,
      reconciling: !o.ready && i.stalled === undefined,
      reason: o.reason,
      message: o.message,
      observedGeneration: i.generation,
    }),
    i.now,
  );
  return compact({
    replicas: i.counts.ready + i.counts.starting,
    readyReplicas: i.counts.ready,
    startingReplicas: i.counts.starting,
    claimedReplicas: i.counts.claimed,
    selector: i.selector,
    message: i.stalled?.message,
    conditions,
    observedGeneration: i.generation,
  });
}
