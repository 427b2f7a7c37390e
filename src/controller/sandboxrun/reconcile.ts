/**
 * reconcileRun(): one level-triggered, idempotent pass over one SandboxRun, by key. It reads the
 * run from the cache, takes the shared policy's verdict on it, makes sure the children exist,
 * computes the status purely, writes it once if it changed (PUT with the resourceVersion, so a
 * stale pass fails with Conflict instead of overwriting), then reports the transition. It never
 * writes the spec, and never touches children it does not control.
 *
 * A run of a pool's shape is served by an idle pool pod (warm-run.ts, serve-warm.ts): the claim,
 * one status write recording the job start, then the attach and the job. The serves this operator
 * holds are in memory (WarmServes); a pass for a run being served here waits for its result, and
 * a run that records a warm job start but has no serve here is followed through its pod.
 */
import { isTerminal } from '../../api/run.js';
import { childName } from '../../api/v1alpha1/labels.js';
import {
  SANDBOX_RUN,
  SandboxRunStatusSchema,
  type SandboxRun,
  type SandboxRunStatus,
} from '../../api/v1alpha1/sandboxrun.js';
import { isNotFound } from '../../kube/errors.js';
import type { Store } from '../../kube/store.js';
import type { Logger } from '../../observability/logger.js';
import type { Policy } from '../../policy/policy.js';
import type { ObjectRef } from '../children.js';
import type { ReconcileResult } from '../kind-controller.js';
import { earliest, endedPass, specNumber, stopPod, writeStatus } from '../lifecycle.js';
import { isPodFinished, observePod, type PodView } from '../pod/observe-pod.js';
import { newChannelKey } from '../../runner/protocol.js';
import { isClaimedBy, poolOfPod } from '../pod/claim-pool-pod.js';
import type { StatusOverlay } from '../status-overlay.js';
import { computeStatus, requeueAfterMs, type StatusInput } from './compute-status.js';
import { evaluateRun, type RunVerdict } from './evaluate-run.js';
import { reportTransition, type ReportDeps } from './report.js';
import {
  ensureRunChildren,
  NOTHING_SEEN,
  observeRunPod,
  type Observed,
  type RunChildrenDeps,
} from './run-children.js';
import { runRef } from './run-ref.js';
import { serveWarm, type WarmServe } from './serve-warm.js';
import { claimRunPod, deleteUnstartedClaims, followPoolPod, warmEndView, warmJob } from './warm-run.js';
import type { WarmServes } from './warm-serves.js';

export interface RunSettings {
  defaultPendingTimeoutSeconds: number;
  defaultTtlSecondsAfterFinished: number | undefined;
}

export interface ReconcileDeps extends RunChildrenDeps, ReportDeps {
  runs: Store<SandboxRun>;
  overlay: StatusOverlay;
  policy: Policy;
  runSettings: RunSettings;
  networkPolicyEnforced: boolean;
  now: () => Date;
  logger: Logger;
  warm: WarmServes;
  requeue(key: string): void;
}

/** How a pool pod's runner says that no job reached it (the job was never written). */
const NO_JOB_ARRIVED = /^no job arrived/;

interface RunView {
  raw: SandboxRun;
  ref: ObjectRef;
  generation: number;
  createdAt: string;
  status: SandboxRunStatus;
  /** When the run needs another look: its pending deadline and TTL, as of this pass. */
  timing: Parameters<typeof requeueAfterMs>[1];
}

function readRun(raw: SandboxRun, deps: ReconcileDeps): RunView {
  const m = raw.metadata ?? {};
  const parsed = SandboxRunStatusSchema.safeParse(raw.status ?? {});
  const createdAt = m.creationTimestamp ?? new Date(0).toISOString();
  const { defaultPendingTimeoutSeconds, defaultTtlSecondsAfterFinished } = deps.runSettings;
  return {
    raw,
    ref: runRef({ name: m.name ?? '', namespace: m.namespace ?? '', uid: m.uid ?? '' }),
    generation: m.generation ?? 1,
    createdAt,
    status: parsed.success ? parsed.data : {},
    timing: {
      createdAt,
      pendingTimeoutSeconds: specNumber(raw.spec, 'pendingTimeoutSeconds') ?? defaultPendingTimeoutSeconds,
      ttlSecondsAfterFinished:
        specNumber(raw.spec, 'ttlSecondsAfterFinished') ?? defaultTtlSecondsAfterFinished,
      now: deps.now().toISOString(),
    },
  };
}

export async function reconcileRun(deps: ReconcileDeps, key: string): Promise<ReconcileResult> {
  const [namespace = '', name = ''] = key.split('/');
  const raw = deps.overlay.latest(key, deps.runs.get(namespace, name));
  if (!raw || raw.metadata?.deletionTimestamp) {
    await stopServe(deps, namespace, deps.warm.forget(key));
    return {}; // owner references garbage-collect the children
  }
  const run = readRun(raw, deps);
  if (run.status.phase && isTerminal(run.status.phase)) return finishedRun(deps, key, run);
  return activeRun(deps, key, run);
}

/** One pass over a run not finished yet: what it is, what the policy says, its serve here. */
interface Pass {
  key: string;
  run: RunView;
  verdict: RunVerdict;
  cancel: boolean;
  serve: WarmServe | undefined;
}

/** A run not finished yet: the verdict, the children (or its warm serve), the status, the report. */
async function activeRun(deps: ReconcileDeps, key: string, run: RunView): Promise<ReconcileResult> {
  const verdict = evaluateRun(run.raw.spec, deps.policy, {
    networkPolicyEnforced: deps.networkPolicyEnforced,
    egress: deps.egress,
  });
  const pass: Pass = {
    key,
    run,
    verdict,
    cancel: verdict.spec?.cancel === true,
    serve: deps.warm.get(run.ref.uid),
  };
  const firstSeen = deps.warm.firstSeen(key, Date.now());
  const held = await servedHere(deps, pass);
  if (held) return held;
  if (await servedWarm(deps, pass)) return {};
  return observedPass(deps, pass, firstSeen);
}

/**
 * A run this operator serves: nothing to do until its result is there (it puts the key back on
 * the queue), unless it is cancelled; a serve whose job never reached the pod serves it again.
 */
async function servedHere(deps: ReconcileDeps, p: Pass): Promise<ReconcileResult | undefined> {
  const { serve } = p;
  if (!serve) return undefined;
  if (!serve.settled) {
    if (!p.cancel) return {};
    serve.abort();
  }
  const settled = serve.settled;
  if (settled?.state === 'lost' && !settled.jobWritten && !p.cancel)
    return serveAgain(deps, p, serve.pod, settled.why);
  return undefined;
}

/** A run not started yet, of a pool's shape: served by an idle pool pod when one is there. */
async function servedWarm(deps: ReconcileDeps, p: Pass): Promise<boolean> {
  const { run, verdict } = p;
  if (!verdict.allowed || p.cancel || run.status.podName) return false;
  await deleteUnstartedClaims(deps, run.ref);
  if (deps.pods.get(run.ref.namespace, childName(run.ref.name, run.ref.uid))) return false; // cold already
  return startWarm(deps, p, verdict);
}

/** The pod that serves the run: a claimed pool pod (its status says), or its own. */
function servingPod(run: RunView): { warm: boolean; podName: string } {
  const { podName, served } = run.status;
  if (served === 'warm' && podName !== undefined) return { warm: true, podName };
  return { warm: false, podName: childName(run.ref.name, run.ref.uid) };
}

/** The pass that observes the run's pod (or its serve's result), writes the status and reports. */
async function observedPass(deps: ReconcileDeps, p: Pass, firstSeen: number): Promise<ReconcileResult> {
  const { key, run, serve } = p;
  const { warm, podName } = servingPod(run);
  const observed = await observeChildren(deps, p, podName);
  const pod = observed.pod;
  if (warm && !serve && !p.cancel && noJobArrived(pod))
    return serveAgain(deps, p, pod, pod.terminated?.failure ?? '');
  if (!warm) countCold(deps, run, pod, firstSeen);
  const status = statusOf(p, observed, podName);
  await writeStatus(deps, { kind: SANDBOX_RUN, key, raw: run.raw, before: run.status, after: status });
  if (serve) tookResult(deps, p, serve, firstSeen);
  await reportPass(deps, p, status, pod?.terminated?.report?.durationMs);
  const after = requeueAfterMs(status, run.timing);
  if (!status.phase || !isTerminal(status.phase)) return { requeueAfterMs: after };
  // A pool pod is never reused: it goes once the run has ended.
  const stopped = await stopPod(deps, run.ref, warm ? 'delete' : 'keep', podName);
  return { requeueAfterMs: earliest(after, stopped) };
}

/** A cold run whose pod this pass made: its acquire time. */
function countCold(deps: ReconcileDeps, run: RunView, pod: PodView | undefined, firstSeen: number): void {
  if (run.status.podName || !pod) return;
  deps.metrics.runAcquire.observe({ path: 'cold' }, (Date.now() - firstSeen) / 1000);
}

/** The transition this pass wrote: Events, metrics, the audit record (report.ts). */
function reportPass(
  deps: ReconcileDeps,
  p: Pass,
  after: SandboxRunStatus,
  runnerDurationMs?: number,
): Promise<void> {
  const { run, verdict } = p;
  return reportTransition(deps, {
    run: run.ref,
    createdAt: run.createdAt,
    annotations: run.raw.metadata?.annotations,
    before: run.status,
    after,
    effective: verdict.allowed ? verdict.effective : undefined,
    runnerDurationMs,
  });
}

/** The serve's result is in the status: the serve is over; its timings are logged. */
function tookResult(deps: ReconcileDeps, p: Pass, serve: WarmServe, firstSeen: number): void {
  deps.warm.delete(p.run.ref.uid);
  if (serve.settled?.state !== 'done' || serve.jobWrittenAt === undefined) return;
  deps.metrics.runAcquire.observe({ path: 'warm' }, (serve.jobWrittenAt - firstSeen) / 1000);
  deps.logger.info({ run: p.key, pod: serve.pod.name, ...serve.timings }, 'Served SandboxRun warm');
}

/** The run's status from what this pass observed (computeStatus, whichever pod serves it). */
function statusOf(
  p: Pass,
  observed: Observed & Pick<StatusInput, 'served'>,
  podName: string,
): SandboxRunStatus {
  const { run, verdict } = p;
  return computeStatus({
    generation: run.generation,
    createdAt: run.createdAt,
    current: run.status,
    verdict: verdict.allowed ? { allowed: true } : { allowed: false, message: verdict.message },
    cancel: p.cancel,
    pendingTimeoutSeconds: run.timing.pendingTimeoutSeconds,
    podName,
    ...observed,
    now: run.timing.now,
  });
}

/**
 * Serves the run from an idle pool pod of its shape when there is one (contract §3): the claim,
 * then one status write that records the job start (Running, the pod, served warm), and only
 * then the attach and the job. False: the run goes cold.
 */
async function startWarm(
  deps: ReconcileDeps,
  p: Pass,
  verdict: Extract<RunVerdict, { allowed: true }>,
): Promise<boolean> {
  const { key, run } = p;
  const claimed = await claimRunPod(
    { ...deps, startGraceSeconds: deps.pod.startGraceSeconds },
    run.ref,
    verdict.effective,
  );
  if (!claimed) return false;
  const pod = { name: claimed.metadata?.name ?? '', uid: claimed.metadata?.uid ?? '' };
  const { namespace } = run.ref;
  // The job start is the claim: the run's deadline counts from here.
  const view: PodView = { ...observePod(claimed), startedAt: run.timing.now };
  const status = statusOf(
    p,
    { ...NOTHING_SEEN, pod: view, served: { served: 'warm', pool: poolOfPod(claimed) } },
    pod.name,
  );
  if (!isClaimedBy(claimed, run.ref)) {
    await writeStatus(deps, { kind: SANDBOX_RUN, key, raw: run.raw, before: run.status, after: status });
    return true; // never attach to a pod the run does not own
  }
  // The attach is set up while the status records the job start; the job waits for that record.
  const jobStart = writeStatus(deps, {
    kind: SANDBOX_RUN,
    key,
    raw: run.raw,
    before: run.status,
    after: status,
  });
  const channelKey = newChannelKey();
  const serve = serveWarm({
    kube: deps.kube,
    namespace,
    pod,
    job: warmJob({ egress: deps.egress, networkPolicyEnforced: deps.networkPolicyEnforced }, run.ref, {
      effective: verdict.effective,
      key: channelKey,
    }),
    key: channelKey,
    outputBytes: verdict.effective.limits.outputBytes,
    limits: deps.output,
    jobStart: jobStart.then(() => undefined),
    onSettled: () => deps.requeue(key),
    now: deps.now,
  });
  try {
    await jobStart;
  } catch (e) {
    serve.abort();
    await deletePoolPod(deps, namespace, pod);
    throw e;
  }
  deps.warm.add(key, run.ref.uid, serve);
  // Off the job's path: the job is on its way while the Events are written.
  await deps.events.normal(
    run.ref,
    'ClaimedPod',
    `Claimed pod ${pod.name} of SandboxPool ${status.pool ?? '(unknown)'}`,
  );
  await reportPass(deps, p, status);
  return true;
}

/**
 * The pool pod ended without running a job: its runner says no job arrived (the attach that
 * claimed it closed first), or the pod reached its deadline with no report at all, which only a
 * runner that never got its job does (with a job, the runner ends the program at its timeout and
 * reports, well before the pod's deadline: the timeout plus the start grace, from the claim).
 */
const noJobArrived = (pod: PodView | undefined): pod is PodView => {
  if (pod === undefined || !isPodFinished(pod) || pod.terminated?.report) return false;
  return NO_JOB_ARRIVED.test(pod.terminated?.failure ?? '') || pod.reason === 'DeadlineExceeded';
};

/**
 * A warm run whose job never reached its pod (the attach failed, or the operator that claimed it
 * stopped before writing it): the pod goes, and the status forgets the job start, so that the next
 * pass serves the run again (another pool pod, or cold).
 */
async function serveAgain(
  deps: ReconcileDeps,
  p: Pass,
  pod: { name: string; uid: string },
  why: string,
): Promise<ReconcileResult> {
  const { key, run } = p;
  await deletePoolPod(deps, run.ref.namespace, pod);
  const { podName: _p, served: _s, pool: _pool, startTime: _t, ...rest } = run.status;
  const after: SandboxRunStatus = {
    ...rest,
    phase: 'Pending',
    message: 'serving the run again: its job never reached its pod',
  };
  await writeStatus(deps, { kind: SANDBOX_RUN, key, raw: run.raw, before: run.status, after });
  deps.warm.delete(run.ref.uid);
  deps.logger.warn(
    { run: key, pod: pod.name, why },
    'The job never reached the pool pod; serving the run again',
  );
  return { requeueAfterMs: 0 };
}

async function deletePoolPod(
  deps: ReconcileDeps,
  namespace: string,
  pod: { name: string; uid: string },
): Promise<void> {
  if (!pod.uid) return;
  await deps.kube.deletePod(namespace, pod.name, pod.uid, 0).catch((e: unknown) => {
    if (!isNotFound(e)) throw e;
  });
}

/** A run being deleted, or gone: its serve here stops, and its pool pod goes. */
async function stopServe(
  deps: ReconcileDeps,
  namespace: string,
  serve: WarmServe | undefined,
): Promise<void> {
  if (serve) await deletePoolPod(deps, namespace, serve.pod);
}

/**
 * What the pass observes: a warm serve's result, a pool pod followed (no serve here), the
 * children of an allowed run (made when missing), or of a cancelled one only a pod that finished.
 */
function observeChildren(deps: ReconcileDeps, p: Pass, podName: string): Promise<Observed> {
  const { run, verdict, serve } = p;
  if (!verdict.allowed) return Promise.resolve(NOTHING_SEEN);
  const result = serve?.settled;
  if (serve && result?.state === 'done') {
    const pod = warmEndView(serve.pod, result, run.status.startTime);
    return Promise.resolve({ ...NOTHING_SEEN, pod, output: result.output });
  }
  if (p.cancel) return observeForCancel(deps, run, podName);
  if (run.status.served === 'warm' && run.status.podName) return followPoolPod(deps, run.ref, podName);
  return ensureRunChildren(
    deps,
    { ...run.ref, podRecorded: run.status.podName !== undefined },
    verdict.effective,
    verdict.job,
  );
}

/** Cancelling: the pod's result if it already finished (the program won the race), else nothing. */
async function observeForCancel(deps: ReconcileDeps, run: RunView, podName: string): Promise<Observed> {
  const pod = deps.pods.get(run.ref.namespace, podName);
  const poolPod = run.status.served === 'warm';
  if (pod && isPodFinished(observePod(pod))) return observeRunPod(deps, run.ref, pod, poolPod);
  return NOTHING_SEEN;
}

/** A finished run: its pod must not keep running (cancelled, or failed while pending); TTL clean-up. */
function finishedRun(deps: ReconcileDeps, key: string, run: RunView): Promise<ReconcileResult> {
  return endedPass(deps, {
    kind: SANDBOX_RUN,
    key,
    ref: run.ref,
    raw: run.raw,
    generation: run.generation,
    status: run.status,
    endedAt: run.status.completionTime,
    ttlSecondsAfterFinished: run.timing.ttlSecondsAfterFinished,
    now: run.timing.now,
    ...(run.status.served === 'warm' ? { finishedPod: 'delete' as const, podName: run.status.podName } : {}),
  });
}
