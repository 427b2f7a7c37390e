/**
 * The operator's side of a warm run (contract §3, §5), the steps reconcileRun() takes for a run a
 * pool pod may serve: claim an idle pod of its shape (after the run's own NetworkPolicy exists;
 * a Conflict or NotFound tries the next pod; none left: cold), delete pods claimed for a run whose
 * status records no job start (a claim whose operator died before that write), and what a pass
 * observes of a run served warm: the serve's result here, or, with no serve here (a new leader),
 * the pool pod itself, followed like a cold run's.
 */
import type { Pod } from '../../kube/objects.js';
import { isNotFound } from '../../kube/errors.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import { isControlledBy, type ObjectRef } from '../children.js';
import { ensureNetworkPolicy } from '../pod/ensure-children.js';
import type { PodView } from '../pod/observe-pod.js';
import type { OperatorMetrics } from '../metrics.js';
import type { Logger } from '../../observability/logger.js';
import {
  claimCandidates,
  claimedPods,
  claimPoolPod,
  podsIn,
  type ClaimResult,
} from '../pod/claim-pool-pod.js';
import { poolShapeLabel } from '../sandboxpool/evaluate-pool.js';
import { RUNNER_FAILED_EXIT } from './compute-status.js';
import {
  NOTHING_SEEN,
  observeRunPod,
  runNetworkPolicy,
  type Observed,
  type RunChildrenDeps,
} from './run-children.js';
import { runPodLabels } from './run-ref.js';
import type { WarmResult } from './serve-warm.js';
import type { ClusterFacts } from './evaluate-run.js';
import { egressEnv } from '../pod/egress.js';
import { encodeJob } from '../../runner/protocol.js';

export interface WarmDeps extends RunChildrenDeps {
  metrics: OperatorMetrics;
  logger: Logger;
  now: () => Date;
}

/**
 * Deletes the pool pods claimed for the run while its status records no job start: their job was
 * never written (the claiming operator stopped before it recorded the start), so the run is served
 * again, by another pod or cold.
 */
export async function deleteUnstartedClaims(deps: WarmDeps, run: ObjectRef): Promise<void> {
  for (const pod of claimedPods(podsIn(deps.pods, run.namespace), run)) {
    const name = pod.metadata?.name ?? '';
    if (pod.metadata?.deletionTimestamp || !pod.metadata?.uid) continue;
    try {
      await deps.kube.deletePod(run.namespace, name, pod.metadata.uid, 0);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    deps.logger.info(
      { run: `${run.namespace}/${run.name}`, pod: name },
      'Deleted a pool pod claimed for a run that records no job start',
    );
  }
}

/**
 * Claims an idle pool pod of the run's shape; the claimed pod, or undefined when the run goes
 * cold (no ready pod of its shape, each one taken first, or an error).
 */
export async function claimRunPod(
  deps: WarmDeps & { startGraceSeconds: number },
  run: ObjectRef,
  effective: EffectiveSpec,
): Promise<Pod | undefined> {
  const shapeLabel = poolShapeLabel(effective, 'run');
  const countClaim = (result: ClaimResult) => deps.metrics.poolClaims.inc({ result });
  if (claimCandidates(podsIn(deps.pods, run.namespace), shapeLabel).length === 0) {
    countClaim('empty');
    return undefined;
  }
  // The claimed pod's labels make the run's own policy select it: that policy exists first.
  const problem = await ensureNetworkPolicy(deps, run, runNetworkPolicy(deps, run, effective));
  if (problem) return undefined; // the cold path meets the same problem and reports it
  try {
    const claim = await claimPoolPod(deps, {
      owner: run,
      countClaim,
      ownerLabels: runPodLabels(run),
      shapeLabel,
      remainingSeconds: effective.limits.timeoutSeconds + deps.startGraceSeconds,
      now: deps.now(),
    });
    return claim.result === 'claimed' ? claim.pod : undefined;
  } catch (e) {
    deps.logger.warn(
      { run: `${run.namespace}/${run.name}`, err: (e as Error).message },
      'Claiming a pool pod failed; the run goes cold',
    );
    return undefined;
  }
}

/** How the pool pod's runner reported the run's end, as a finished pod's view (what computeStatus reads). */
export function warmEndView(
  pod: { name: string; uid: string },
  result: Extract<WarmResult, { state: 'done' }>,
  startTime: string | undefined,
): PodView {
  const report = result.end.kind === 'exit' ? result.end.report : undefined;
  const exitCode = report ? report.exitCode : RUNNER_FAILED_EXIT;
  return {
    name: pod.name,
    uid: pod.uid,
    phase: exitCode === 0 ? 'Succeeded' : 'Failed',
    reason: undefined,
    message: undefined,
    deleting: false,
    ready: false,
    waiting: undefined,
    unschedulable: undefined,
    startedAt: startTime,
    terminated: {
      exitCode,
      reason: undefined,
      startedAt: startTime,
      finishedAt: result.finishedAt,
      report,
      failure: result.end.kind === 'failure' ? result.end.message : undefined,
    },
  };
}

/**
 * A run served warm that no serve here follows (a new leader, or an attach lost): its pool pod,
 * read like a cold run's (its termination report, and its log without the trailer).
 */
export async function followPoolPod(deps: WarmDeps, run: ObjectRef, podName: string): Promise<Observed> {
  const pod = deps.pods.get(run.namespace, podName) ?? (await deps.kube.getPod(run.namespace, podName));
  if (!pod || !isControlledBy(pod, run)) return { ...NOTHING_SEEN, podLost: true };
  return observeRunPod(deps, run, pod, true);
}

/**
 * A warm run's job, written to the pool pod's stdin (never stored): with an allowlist, the proxy
 * variables travel in it, credential included, since the pool pod was made before the run.
 */
export function warmJob(
  cluster: ClusterFacts,
  run: ObjectRef,
  { effective, key }: { effective: EffectiveSpec; key: Buffer },
): Buffer {
  const egress = effective.network.egress === 'allowlist' ? cluster.egress : undefined;
  const spec = egress
    ? { ...effective, env: [...effective.env, ...egressEnv(egress, { kind: 'run', uid: run.uid })] }
    : effective;
  return encodeJob(spec, { key, requireNoNetwork: !egress && !cluster.networkPolicyEnforced });
}
