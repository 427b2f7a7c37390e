/**
 * reconcilePool(): one level-triggered pass over one SandboxPool, by key. It takes the policy's
 * verdict on the pool's spec, counts the pool's pods (the cache corrected by this operator's own
 * writes the cache has not shown yet: PoolExpectations), deletes the idle pods that ended, aged
 * out, no longer have the pool's shape or are surplus (each delete guarded by the pod's
 * resourceVersion, so a pod claimed meanwhile stays), makes sure of the namespace's deny-all
 * policy, creates the missing pods, computes the status from the results of those writes, writes
 * it once if it changed, and reports. A pool being deleted is left to the garbage collector: its
 * idle pods go with it (owner references), claimed ones belong to their run and stay.
 */
import { LABEL_POOL_UID } from '../../api/v1alpha1/labels.js';
import {
  SANDBOX_POOL,
  SandboxPoolStatusSchema,
  type SandboxPool,
  type SandboxPoolStatus,
} from '../../api/v1alpha1/sandboxpool.js';
import { isConflict, isNotFound } from '../../kube/errors.js';
import type { Pod, RuntimeClass } from '../../kube/objects.js';
import type { Store } from '../../kube/store.js';
import type { Logger } from '../../observability/logger.js';
import type { Policy } from '../../policy/policy.js';
import type { ObjectRef } from '../children.js';
import type { EventRecorder } from '../events.js';
import type { ReconcileResult } from '../kind-controller.js';
import { earliest, writeStatus, type StatusWriteDeps } from '../lifecycle.js';
import type { OperatorMetrics } from '../metrics.js';
import type { PodSettings } from '../pod/build-sandbox-pod.js';
import { ensureNamespacePolicy, type NamespacePolicyDeps } from '../pod/namespace-policy.js';
import type { StatusOverlay } from '../status-overlay.js';
import { buildPoolPod, type PoolShape } from './build-pool-pod.js';
import { computePoolStatus, type PoolCounts } from './compute-status.js';
import { evaluatePool } from './evaluate-pool.js';
import type { PoolExpectations } from './expectations.js';
import type { FailureBackoff } from './failure-backoff.js';
import { planPool, type PoolPlan, type ReplaceReason } from './plan-pool.js';
import { idlePodSelector, poolRef } from './pool-ref.js';
import type { ClusterEgress } from '../pod/egress.js';

export interface PoolSettings {
  policy: Policy;
  pod: PodSettings;
  /** The cluster enforces NetworkPolicy (declared in the config): without it the session runner checks its interfaces. */
  networkPolicyEnforced: boolean;
  /** The egress proxy, when the cluster runs one (pods of an egress shape carry its address). */
  egress?: ClusterEgress | undefined;
}

export interface PoolReconcileDeps extends NamespacePolicyDeps, StatusWriteDeps {
  pools: Store<SandboxPool>;
  pods: Store<Pod>;
  runtimeClasses: Store<RuntimeClass>;
  events: EventRecorder;
  metrics: OperatorMetrics;
  logger: Logger;
  now: () => Date;
  overlay: StatusOverlay;
  expectations: PoolExpectations;
  backoff: FailureBackoff;
  settings: PoolSettings;
  /** Counts of the pools as the last pass left them (sandpit_pool_pods), and pods' creation times (refill). */
  observed: PoolObservations;
}

/** What the pool controller remembers between passes for its metrics. */
export interface PoolObservations {
  counts: Map<string, { namespace: string; pool: string; counts: PoolCounts }>;
  /** Pods this process created and has not seen ready yet, by UID: their pool, and when (ms, performance clock). */
  createdAt: Map<string, { key: string; at: number }>;
}

/** A pass looks at a pool with starting pods again this soon even if no event comes (a lost one). */
const STARTING_RECHECK_MS = 30_000;

const REPLACED: Record<ReplaceReason, string> = {
  Ended: 'it ended',
  Expired: 'it was idle longer than maxIdleSeconds',
  ShapeChanged: "its shape is no longer the pool's",
  ScaledDown: 'the pool has more pods than replicas',
};

export function podsOfPool(pods: Store<Pod>, namespace: string, uid: string): Pod[] {
  return pods
    .list()
    .filter((p) => p.metadata?.namespace === namespace && p.metadata.labels?.[LABEL_POOL_UID] === uid);
}

function readPool(
  raw: SandboxPool,
  key: string,
): { pool: ObjectRef; before: SandboxPoolStatus; generation: number } {
  const [namespace = '', name = ''] = key.split('/');
  const m = raw.metadata;
  const parsed = SandboxPoolStatusSchema.safeParse(raw.status ?? {});
  return {
    pool: poolRef({ name: m.name ?? name, namespace, uid: m.uid ?? '' }),
    before: parsed.success ? parsed.data : {},
    generation: m.generation ?? 1,
  };
}

/** What the pool may have: the shape of its pods and how many, or why it may have none. */
interface PoolWanted {
  shape: PoolShape | undefined;
  replicas: number;
  stalled: { reason: string; message: string } | undefined;
}

function wantedOf(deps: PoolReconcileDeps, spec: unknown): PoolWanted {
  const verdict = evaluatePool(spec, deps.settings.policy);
  if (!verdict.allowed)
    return { shape: undefined, replicas: 0, stalled: { reason: 'PolicyDenied', message: verdict.message } };
  const stalled = runtimeClassMissing(deps.runtimeClasses, verdict.effective.runtime);
  if (stalled) return { shape: undefined, replicas: 0, stalled };
  const { mode, maxIdleSeconds, replicas } = verdict.spec;
  return {
    shape: { mode, maxIdleSeconds, effective: verdict.effective, shapeLabel: verdict.shapeLabel },
    replicas,
    stalled: undefined,
  };
}

export async function reconcilePool(deps: PoolReconcileDeps, key: string): Promise<ReconcileResult> {
  const [namespace = '', name = ''] = key.split('/');
  const raw = deps.overlay.latest(key, deps.pools.get(namespace, name));
  if (!raw || raw.metadata?.deletionTimestamp) {
    deps.expectations.forget(key);
    deps.backoff.forget(key);
    deps.observed.counts.delete(key);
    return {};
  }
  const { pool, before, generation } = readPool(raw, key);
  const { shape, replicas, stalled } = wantedOf(deps, raw.spec);
  const pods = deps.expectations.apply(key, podsOfPool(deps.pods, namespace, pool.uid), deps.now().getTime());
  const plan = planPool({
    pods,
    poolUid: pool.uid,
    shapeLabel: shape?.shapeLabel,
    replicas,
    maxIdleSeconds: shape?.maxIdleSeconds ?? Number.MAX_SAFE_INTEGER,
    now: deps.now().toISOString(),
  });
  observeRefills(deps, key, plan, pods);
  await removePods(deps, { key, pool }, plan.remove);
  const waitMs = failureWait(deps, key, plan);
  const created = await createPods(deps, { key, pool, shape }, waitMs === 0 ? plan.create : 0);
  const counts: PoolCounts = {
    ready: plan.ready.length,
    starting: plan.starting.length + created,
    claimed: plan.claimed,
  };
  deps.observed.counts.set(key, { namespace, pool: pool.name, counts });
  const after = computePoolStatus({
    generation,
    current: before,
    stalled,
    replicas,
    counts,
    failures: deps.backoff.failures(key),
    selector: idlePodSelector(pool),
    now: deps.now().toISOString(),
  });
  await writeStatus(deps, { kind: SANDBOX_POOL, key, raw, before, after });
  if (stalled && before.message !== stalled.message)
    deps.events.warning(pool, stalled.reason, stalled.message);
  return { requeueAfterMs: nextLookMs(plan, counts, waitMs) };
}

/**
 * When to look again without an event: a pod ageing out, a held refill coming due, the end of a
 * backoff, a starting pod's lost event.
 */
function nextLookMs(plan: PoolPlan, counts: PoolCounts, waitMs: number): number | undefined {
  return earliest(
    plan.nextExpiryMs,
    plan.nextRefillMs,
    waitMs > 0 && plan.create > 0 ? waitMs : undefined,
    counts.starting > 0 ? STARTING_RECHECK_MS : undefined,
  );
}

/** How long creating waits because the pool's pods keep failing (0: create now). */
function failureWait(deps: PoolReconcileDeps, key: string, plan: PoolPlan): number {
  return deps.backoff.next(key, {
    failed: plan.remove.filter((r) => r.reason === 'Ended' && r.pod.status?.phase === 'Failed').length,
    anyReady: plan.ready.length > 0,
    nowMs: deps.now().getTime(),
  });
}

function runtimeClassMissing(
  classes: Store<RuntimeClass>,
  runtime: string | undefined,
): { reason: string; message: string } | undefined {
  if (!runtime || !classes.hasSynced() || classes.get('', runtime)) return undefined;
  return {
    reason: 'RuntimeClassNotFound',
    message: `RuntimeClass "${runtime}" does not exist in the cluster`,
  };
}

/** sandpit_pool_refill_seconds: each pod this process created, once, when a pass first sees it ready. */
function observeRefills(deps: PoolReconcileDeps, key: string, plan: PoolPlan, pods: readonly Pod[]): void {
  const { createdAt } = deps.observed;
  for (const pod of plan.ready) {
    const uid = pod.metadata?.uid ?? '';
    const created = createdAt.get(uid);
    if (created === undefined) continue;
    deps.metrics.poolRefill.observe((performance.now() - created.at) / 1000);
    createdAt.delete(uid);
  }
  // A pod gone before it was ready (deleted by hand, ended) has no refill time.
  const present = new Set(pods.map((p) => p.metadata?.uid));
  for (const [uid, created] of createdAt) if (created.key === key && !present.has(uid)) createdAt.delete(uid);
}

interface PoolTarget {
  key: string;
  pool: ObjectRef;
}

/** Deletes the pods, each only if unchanged since it was read (a pod claimed meanwhile stays). */
async function removePods(
  deps: PoolReconcileDeps,
  target: PoolTarget,
  remove: PoolPlan['remove'],
): Promise<void> {
  for (const { pod, reason } of remove) {
    const { name = '', uid = '', resourceVersion = '' } = pod.metadata ?? {};
    try {
      await deps.kube.deletePodIfUnchanged(target.pool.namespace, { name, uid, resourceVersion });
    } catch (e) {
      // Claimed or changed meanwhile (Conflict), or gone already: the next pass sees it as it is.
      if (isConflict(e) || isNotFound(e)) continue;
      throw e;
    }
    deps.expectations.deleted(target.key, uid, deps.now().getTime());
    deps.observed.createdAt.delete(uid);
    deps.events.normal(target.pool, 'DeletedPod', `Deleted pod ${name}: ${REPLACED[reason]}`);
  }
}

/** Creates `count` pods of the pool's shape, after its namespace's deny-all policy; returns how many. */
async function createPods(
  deps: PoolReconcileDeps,
  target: PoolTarget & { shape: PoolShape | undefined },
  count: number,
): Promise<number> {
  if (count === 0 || !target.shape) return 0;
  await ensureNamespacePolicy(deps, target.pool.namespace);
  const want = buildPoolPod(target.pool, target.shape, {
    settings: deps.settings.pod,
    ceilings: deps.settings.policy,
    requireNoNetwork: !deps.settings.networkPolicyEnforced,
    egress: deps.settings.egress,
  });
  for (let i = 0; i < count; i += 1) {
    const created = await deps.kube.createPod(target.pool.namespace, want);
    deps.expectations.created(target.key, created, deps.now().getTime());
    deps.observed.createdAt.set(created.metadata?.uid ?? '', { key: target.key, at: performance.now() });
    deps.events.normal(target.pool, 'CreatedPod', `Created pod ${created.metadata?.name ?? ''}`);
  }
  return count;
}
