/**
 * The operator's side of a warm run, the steps reconcileRun() takes for a run a pool pod may
 * serve: claim an idle pod of its shape (after the run's own NetworkPolicy exists; pods attached
 * to ahead first; a Conflict or NotFound tries the next pod; none left: cold), adopt the pod
 * claimed for a run whose status records no job start yet (its operator stopped before that
 * write), and what a pass observes of a run served warm: the serve's result here, or, with no
 * serve here (a new leader), the pool pod itself, followed like a cold run's.
 */
import type { Pod } from '../../kube/objects.js';
import { isNotFound } from '../../kube/errors.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import { isControlledBy, type ObjectRef } from '../children.js';
import { ensureNetworkPolicy } from '../pod/ensure-children.js';
import { isPodFinished, observePod, servingView, type PodView } from '../pod/observe-pod.js';
import type { OperatorMetrics } from '../metrics.js';
import type { Logger } from '../../observability/logger.js';
import {
  CLAIM_GRACE_SECONDS,
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
import type { HeldAttach, PoolAttachments } from './pool-attachments.js';
import type { WarmServes } from './warm-serves.js';
import { SANDBOX_CONTAINER } from '../../api/v1alpha1/labels.js';
import type { FilesRead } from './read-output.js';
import type { ClusterFacts } from './evaluate-run.js';
import { egressEnv } from '../pod/egress.js';
import { encodeJob } from '../../runner/protocol.js';

export interface WarmDeps extends RunChildrenDeps {
  metrics: OperatorMetrics;
  logger: Logger;
  now: () => Date;
}

/**
 * The pool pod claimed for the run while its status records no job start: the claim is the job's
 * start (the job is written right after it, while the status is written), so the operator that
 * claimed it may have written the job before it stopped. The pod is the run's, and the run is
 * followed through it; a runner that got no job says so and the run is served again. Further
 * claimed pods (a claim whose answer was lost, then another claim) never got a job: they go.
 */
export async function unrecordedClaim(deps: WarmDeps, run: ObjectRef): Promise<Pod | undefined> {
  const [first, ...rest] = claimedPods(podsIn(deps.pods, run.namespace), run).filter(
    (p) => p.metadata?.uid && !p.metadata.deletionTimestamp,
  );
  for (const pod of rest) {
    await deps.kube
      .deletePod(run.namespace, pod.metadata!.name!, pod.metadata!.uid!, 0)
      .catch((e: unknown) => {
        if (!isNotFound(e)) throw e;
      });
  }
  return first;
}

/**
 * Ends, at once, the wait of a claimed pod's runner that got no job: an attach that closes makes
 * its stdin (stdinOnce) end, and a runner with no whole job then exits saying no job arrived; a
 * runner that has its job goes on. Used for a pod claimed by an operator that stopped: its own
 * attach may never have been opened.
 */
export async function endWaitForJob(
  deps: Pick<WarmDeps, 'kube' | 'logger'>,
  namespace: string,
  pod: string,
): Promise<void> {
  try {
    const attached = await deps.kube.attach(
      { namespace, pod, container: SANDBOX_CONTAINER },
      () => undefined,
    );
    attached.close();
  } catch (e) {
    deps.logger.debug(
      { pod: `${namespace}/${pod}`, err: (e as Error).message },
      'Could not attach to end a wait for a job',
    );
  }
}

/** A claimed pool pod, and the attach held to it ahead (if one was open). */
export interface WarmClaim {
  pod: Pod;
  held: HeldAttach | undefined;
}

/**
 * Claims an idle pool pod of the run's shape, one held ahead first; the claimed pod, or
 * undefined when the run goes cold (no ready pod of its shape, each one taken first, or an error).
 */
export async function claimRunPod(
  deps: WarmDeps & { attachments: PoolAttachments },
  run: ObjectRef,
  effective: EffectiveSpec,
): Promise<WarmClaim | undefined> {
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
      remainingSeconds: effective.limits.timeoutSeconds + CLAIM_GRACE_SECONDS,
      now: deps.now(),
      hold: deps.attachments,
    });
    if (claim.result !== 'claimed') {
      deps.logger.info(
        { run: `${run.namespace}/${run.name}`, shape: shapeLabel, result: claim.result },
        "No idle pool pod of the run's shape could be claimed; the run goes cold",
      );
      return undefined;
    }
    return { pod: claim.pod, held: deps.attachments.take(claim.pod.metadata?.uid ?? '') };
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
    ...servingView(pod, startTime),
    phase: exitCode === 0 ? 'Succeeded' : 'Failed',
    ready: false,
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
 * read like a cold run's (its termination report, and its log without the trailer). The first
 * look at a running one ends its runner's wait if it never got its job (endWaitForJob).
 */
export async function followPoolPod(
  deps: WarmDeps & { warm: WarmServes },
  run: ObjectRef,
  serving: { name: string; files: FilesRead | undefined },
): Promise<Observed> {
  const pod =
    deps.pods.get(run.namespace, serving.name) ?? (await deps.kube.getPod(run.namespace, serving.name));
  if (!pod || !isControlledBy(pod, run)) return { ...NOTHING_SEEN, podLost: true };
  if (
    deps.warm.firstFollow(`${run.namespace}/${run.name}`, pod.metadata?.uid ?? '') &&
    !isPodFinished(observePod(pod))
  )
    void endWaitForJob(deps, run.namespace, serving.name);
  return observeRunPod(deps, run, pod, { poolPod: true, files: serving.files });
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
