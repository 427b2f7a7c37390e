/**
 * reconcileRun(): one level-triggered, idempotent pass over one SandboxRun, by key. It reads the
 * run from the cache, takes the shared policy's verdict on it, makes sure the children exist,
 * computes the status purely, writes it once if it changed (PUT with the resourceVersion, so a
 * stale pass fails with Conflict instead of overwriting), then reports the transition. It never
 * writes the spec, and never touches children it does not control.
 *
 * A run of a pool's shape is served by an idle pool pod (warm-run.ts, serve-warm.ts): the claim,
 * which is the job's start, then the job on the attach held to the pod ahead (or opened then),
 * while one status write records the start. The serves this operator holds are in memory
 * (WarmServes); a pass for a run being served here waits for its result, and a run served warm
 * with no serve here is followed through its pod.
 */
import { isTerminal } from '../../api/run.js';
import { childName, SANDBOX_CONTAINER } from '../../api/v1alpha1/labels.js';
import {
  SANDBOX_RUN,
  SandboxRunStatusSchema,
  type SandboxRun,
  type SandboxRunStatus,
} from '../../api/v1alpha1/sandboxrun.js';
import { isNotFound } from '../../kube/errors.js';
import type { Pod } from '../../kube/objects.js';
import { keepRunFiles } from './keep-files.js';
import type { EffectiveOutputs } from '../../policy/evaluate.js';
import type { Store } from '../../kube/store.js';
import type { Logger } from '../../observability/logger.js';
import type { Policy } from '../../policy/policy.js';
import type { ObjectRef } from '../children.js';
import type { ReconcileResult } from '../kind-controller.js';
import { earliest, endedPass, specNumber, stopPod, writeStatus } from '../lifecycle.js';
import type { FinishedPod } from '../pod/pod-stop.js';
import { isPodFinished, observePod, servingView, type PodView } from '../pod/observe-pod.js';
import { newChannelKey } from '../../runner/protocol.js';
import { isClaimedBy, poolOfPod, recordClaimed } from '../pod/claim-pool-pod.js';
import type { StatusOverlay } from '../status-overlay.js';
import { computeStatus, finishRecordedAt, requeueAfterMs, type StatusInput } from './compute-status.js';
import { evaluateRun, type RunVerdict } from './evaluate-run.js';
import { reportStart, reportTransition, type ReportDeps } from './report.js';
import {
  ensureRunChildren,
  filesReadOf,
  NOTHING_SEEN,
  observeRunPod,
  type Observed,
  type RunChildrenDeps,
} from './run-children.js';
import type { FilesRead } from './read-output.js';
import { runRef } from './run-ref.js';
import { serveWarm, type WarmServe } from './serve-warm.js';
import { claimRunPod, followPoolPod, unrecordedClaim, warmEndView, warmJob } from './warm-run.js';
import type { WarmServes } from './warm-serves.js';
import type { PoolAttachments } from './pool-attachments.js';

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
  attachments: PoolAttachments;
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
  return (
    (await servedHere(deps, pass)) ?? (await servedWarm(deps, pass)) ?? observedPass(deps, pass, firstSeen)
  );
}

/**
 * A run this operator serves: nothing to do until its result is there (it puts the key back on
 * the queue) but record its start once RECORD_START_AFTER_MS have passed, unless it is cancelled;
 * a serve whose job never reached the pod serves it again.
 */
async function servedHere(deps: ReconcileDeps, p: Pass): Promise<ReconcileResult | undefined> {
  const { serve } = p;
  if (!serve) return undefined;
  if (!serve.settled) {
    if (!p.cancel) return recordStartOnce(deps, p, serve);
    serve.abort();
  }
  const settled = serve.settled;
  if (settled?.state === 'lost' && !settled.jobWritten && !p.cancel)
    return serveAgain(deps, p, serve.pod, settled.why);
  return undefined;
}

/**
 * A run not started yet, of a pool's shape: served by an idle pool pod when one is there.
 * Undefined: it is not (it goes, or went, cold).
 */
async function servedWarm(deps: ReconcileDeps, p: Pass): Promise<ReconcileResult | undefined> {
  const { run, verdict } = p;
  if (!verdict.allowed || p.cancel || run.status.podName || p.serve) return undefined;
  const claimed = await unrecordedClaim(deps, run.ref);
  if (claimed && (await adoptClaim(deps, p, claimed))) return {};
  if (deps.pods.get(run.ref.namespace, childName(run.ref.name, run.ref.uid))) return undefined; // cold already
  return startWarm(deps, p, verdict);
}

/** The pod that serves the run: its serve's here, a claimed pool pod (its status says), or its own. */
function servingPod(run: RunView, serve: WarmServe | undefined): { warm: boolean; podName: string } {
  if (serve) return { warm: true, podName: serve.pod.name };
  const { podName, served } = run.status;
  if (served === 'warm' && podName !== undefined) return { warm: true, podName };
  return { warm: false, podName: childName(run.ref.name, run.ref.uid) };
}

/** The pass that observes the run's pod (or its serve's result), writes the status and reports. */
async function observedPass(deps: ReconcileDeps, p: Pass, firstSeen: number): Promise<ReconcileResult> {
  const { key, run, serve } = p;
  const { warm, podName } = servingPod(run, serve);
  const observed = await observeChildren(deps, p, podName);
  const pod = observed.pod;
  if (warm && neverRan(p, pod)) return serveAgain(deps, p, pod, pod.terminated?.failure ?? '');
  if (!warm) countCold(deps, run, pod, firstSeen);
  const outputs = await keepRunFiles(deps.kube, p.run.ref, askedOutputs(p), observed);
  const status = statusOf(p, { ...observed, outputs }, podName);
  await writeStatus(deps, { kind: SANDBOX_RUN, key, raw: run.raw, before: run.status, after: status });
  if (serve) tookResult(deps, p, serve, firstSeen);
  reportPass(deps, p, status, pod?.terminated?.report?.durationMs);
  const after = requeueAfterMs(status, run.timing);
  if (!status.phase || !isTerminal(status.phase)) return { requeueAfterMs: after };
  const stopped = await stopPod(deps, run.ref, warm ? servedPodEnd(status.phase) : 'keep', podName);
  return { requeueAfterMs: earliest(after, stopped) };
}

/**
 * The job never ran in the pool pod, and the runner proves it (a serve that lost its attach may
 * have written the job into a stdin that had already closed): the run may be served again.
 */
const neverRan = (p: Pass, pod: PodView | undefined): pod is PodView =>
  p.serve?.settled?.state !== 'done' && !p.cancel && noJobArrived(pod);

/** The files an allowed run asked for. */
const askedOutputs = (p: Pass): EffectiveOutputs | undefined =>
  p.verdict.allowed ? p.verdict.effective.outputs : undefined;

/** A cold run whose pod this pass made: its acquire time. */
function countCold(deps: ReconcileDeps, run: RunView, pod: PodView | undefined, firstSeen: number): void {
  if (run.status.podName || !pod) return;
  deps.metrics.runAcquire.observe({ path: 'cold' }, (Date.now() - firstSeen) / 1000);
}

/** The transition this pass wrote: Events, metrics, the audit record (report.ts). */
function reportPass(deps: ReconcileDeps, p: Pass, after: SandboxRunStatus, runnerDurationMs?: number): void {
  const { run, verdict } = p;
  reportTransition(deps, {
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
  observed: Observed & Pick<StatusInput, 'served' | 'outputs'>,
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
 * How long a warm run's start goes unrecorded: a run that ends sooner (most do) gets one status
 * write, its result, instead of two; a longer one is Running, with its pod, from then on (when the
 * gateway starts following its log, which holds all its output from the first byte).
 */
const RECORD_START_AFTER_MS = 100;

/**
 * Serves the run from an idle pool pod of its shape when there is one: the claim, which is the
 * job's start (the run's deadline counts from it), then at once the job, on the attach held to the
 * pod ahead (or one opened now). Its `ClaimedPod` and `Started` Events go out meanwhile; its
 * status records the start RECORD_START_AFTER_MS later, if the result has not come by then.
 * Undefined: the run goes cold.
 */
async function startWarm(
  deps: ReconcileDeps,
  p: Pass,
  verdict: Extract<RunVerdict, { allowed: true }>,
): Promise<ReconcileResult | undefined> {
  const { key, run } = p;
  const claim = await claimRunPod(deps, run.ref, verdict.effective);
  if (!claim) return undefined;
  const { pod: claimed, held } = claim;
  const pod = { name: claimed.metadata?.name ?? '', uid: claimed.metadata?.uid ?? '' };
  const { namespace } = run.ref;
  const pool = poolOfPod(claimed);
  const status = recordedStart(p, pod, pool, run.timing.now);
  if (!isClaimedBy(claimed, run.ref)) {
    void held?.opened.then((attached) => attached?.close());
    await writeStatus(deps, { kind: SANDBOX_RUN, key, raw: run.raw, before: run.status, after: status });
    return {}; // never attach to a pod the run does not own
  }
  const channelKey = newChannelKey();
  const serve = serveWarm({
    open: async (onStdout, onStderr) => {
      held?.route(onStdout, onStderr);
      return (
        (await held?.opened) ??
        deps.kube.attach({ namespace, pod: pod.name, container: SANDBOX_CONTAINER }, onStdout, onStderr)
      );
    },
    attachedAhead: held !== undefined,
    namespace,
    pod,
    pool,
    startedAt: run.timing.now,
    job: warmJob({ egress: deps.egress, networkPolicyEnforced: deps.networkPolicyEnforced }, run.ref, {
      effective: verdict.effective,
      key: channelKey,
    }),
    key: channelKey,
    outputBytes: verdict.effective.limits.outputBytes,
    limits: deps.output,
    files: filesReadOf(verdict.effective),
    onSettled: () => deps.requeue(key),
    now: deps.now,
  });
  deps.warm.add(key, run.ref.uid, serve);
  recordClaimed(deps.events, run.ref, pod.name, pool);
  reportStart(
    deps,
    { run: run.ref, createdAt: run.createdAt, after: status },
    { metric: false, event: true },
  );
  return { requeueAfterMs: RECORD_START_AFTER_MS };
}

/**
 * A run served here whose status does not record its start yet: recorded once
 * RECORD_START_AFTER_MS have passed since the claim (its Events went out then already).
 */
async function recordStartOnce(deps: ReconcileDeps, p: Pass, serve: WarmServe): Promise<ReconcileResult> {
  const { key, run } = p;
  if (run.status.podName) return {};
  const left = Date.parse(serve.startedAt) + RECORD_START_AFTER_MS - deps.now().getTime();
  if (left > 0) return { requeueAfterMs: left };
  const status = recordedStart(p, serve.pod, serve.pool, serve.startedAt);
  await writeStatus(deps, { kind: SANDBOX_RUN, key, raw: run.raw, before: run.status, after: status });
  reportStart(
    deps,
    { run: run.ref, createdAt: run.createdAt, after: status },
    { metric: true, event: false },
  );
  return {};
}

/**
 * The status that records a warm run's start: Running, in the claimed pool pod, from `startedAt`
 * (what the pod did since is read by the passes that follow it).
 */
function recordedStart(
  p: Pass,
  pod: { name: string; uid: string },
  pool: string | undefined,
  startedAt: string,
): SandboxRunStatus {
  const view = servingView(pod, startedAt);
  return statusOf(p, { ...NOTHING_SEEN, pod: view, served: { served: 'warm', pool } }, pod.name);
}

/**
 * A pool pod claimed for the run by an operator that stopped before it recorded the start: the
 * pod is the run's (its job may have been written), so the status records it, and the passes that
 * follow read the pod as a new leader's do (followPoolPod). A pod whose runner already said that
 * no job arrived goes instead (false: the run is served as if never claimed).
 */
async function adoptClaim(deps: ReconcileDeps, p: Pass, claimed: Pod): Promise<boolean> {
  const { key, run } = p;
  const view = observePod(claimed);
  if (noJobArrived(view)) {
    await deletePoolPod(deps, run.ref.namespace, view);
    deps.logger.warn(
      { run: key, pod: view.name, why: view.terminated?.failure ?? view.reason },
      'The job never reached the pool pod; serving the run again',
    );
    return false;
  }
  const status = recordedStart(p, view, poolOfPod(claimed), run.timing.now);
  await writeStatus(deps, { kind: SANDBOX_RUN, key, raw: run.raw, before: run.status, after: status });
  deps.logger.info(
    { run: key, pod: claimed.metadata?.name },
    'Adopted a pool pod claimed for the run before its start was recorded',
  );
  reportPass(deps, p, status);
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
function observeChildren(
  deps: ReconcileDeps,
  p: Pass,
  podName: string,
): Promise<Observed & Pick<StatusInput, 'served'>> {
  const { run, verdict, serve } = p;
  if (!verdict.allowed) return Promise.resolve(NOTHING_SEEN);
  const result = serve?.settled;
  if (serve && result?.state === 'done') {
    const pod = warmEndView(serve.pod, result, run.status.startTime ?? serve.startedAt);
    return Promise.resolve({
      ...NOTHING_SEEN,
      pod,
      output: result.output,
      files: result.files,
      served: { served: 'warm', pool: serve.pool },
    });
  }
  const { warm } = servingPod(run, serve);
  const files = filesReadOf(verdict.effective);
  // A serve that lost its attach: its pool pod is followed, and its status says how it is served.
  const served = serve ? { served: { served: 'warm' as const, pool: serve.pool } } : {};
  if (p.cancel)
    return observeForCancel(deps, run, { name: podName, files, poolPod: warm }).then((o) => ({
      ...o,
      ...served,
    }));
  if (warm) return followPoolPod(deps, run.ref, { name: podName, files }).then((o) => ({ ...o, ...served }));
  return ensureRunChildren(
    deps,
    { ...run.ref, podRecorded: run.status.podName !== undefined },
    verdict.effective,
    verdict.job,
  );
}

/** Cancelling: the pod's result if it already finished (the program won the race), else nothing. */
async function observeForCancel(
  deps: ReconcileDeps,
  run: RunView,
  serving: { name: string; files: FilesRead | undefined; poolPod: boolean },
): Promise<Observed> {
  const pod = deps.pods.get(run.ref.namespace, serving.name);
  if (pod && isPodFinished(observePod(pod)))
    return observeRunPod(deps, run.ref, pod, { poolPod: serving.poolPod, files: serving.files });
  return NOTHING_SEEN;
}

/**
 * A pool pod is never reused: it goes once the run has ended, at once when cancelled, else once
 * the kubelet has ended its log's followers (LINGER_MS after it finished).
 */
const servedPodEnd = (phase: string | undefined): FinishedPod =>
  phase === 'Cancelled' ? 'delete' : 'linger';

/** A finished run: its pod must not keep running (cancelled, or failed while pending); TTL clean-up. */
function finishedRun(deps: ReconcileDeps, key: string, run: RunView): Promise<ReconcileResult> {
  return endedPass(deps, {
    kind: SANDBOX_RUN,
    key,
    ref: run.ref,
    raw: run.raw,
    generation: run.generation,
    status: run.status,
    endedAt: finishRecordedAt(run.status),
    ttlSecondsAfterFinished: run.timing.ttlSecondsAfterFinished,
    now: run.timing.now,
    ...(run.status.served === 'warm'
      ? { finishedPod: servedPodEnd(run.status.phase), podName: run.status.podName }
      : {}),
  });
}
