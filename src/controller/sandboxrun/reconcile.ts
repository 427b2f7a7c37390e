/**
 * reconcileRun(): one level-triggered, idempotent pass over one SandboxRun, by key. It reads the
 * run from the cache, takes the shared policy's verdict on it, makes sure the children exist,
 * computes the status purely, writes it once if it changed (PUT with the resourceVersion, so a
 * stale pass fails with Conflict instead of overwriting), then reports the transition. It never
 * writes the spec, and never touches children it does not control.
 */
import { isTerminal } from '../../api/run.js';
import { childName } from '../../api/v1alpha1/labels.js';
import {
  SANDBOX_RUN,
  SandboxRunStatusSchema,
  type SandboxRun,
  type SandboxRunStatus,
} from '../../api/v1alpha1/sandboxrun.js';
import type { Store } from '../../kube/store.js';
import type { Logger } from '../../observability/logger.js';
import type { Policy } from '../../policy/policy.js';
import type { ObjectRef } from '../children.js';
import type { ReconcileResult } from '../kind-controller.js';
import { earliest, endedPass, specNumber, stopPod, writeStatus } from '../lifecycle.js';
import { isPodFinished, observePod } from '../pod/observe-pod.js';
import type { StatusOverlay } from '../status-overlay.js';
import { computeStatus, requeueAfterMs } from './compute-status.js';
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
}

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
  if (!raw || raw.metadata?.deletionTimestamp) return {}; // owner references garbage-collect the children
  const run = readRun(raw, deps);
  if (run.status.phase && isTerminal(run.status.phase)) return finishedRun(deps, key, run);
  return activeRun(deps, key, run);
}

/** A run not finished yet: the verdict, the children, the status, the report. */
async function activeRun(deps: ReconcileDeps, key: string, run: RunView): Promise<ReconcileResult> {
  const verdict = evaluateRun(run.raw.spec, deps.policy, {
    networkPolicyEnforced: deps.networkPolicyEnforced,
  });
  const observed = await observeChildren(deps, run, verdict);
  const status = computeStatus({
    generation: run.generation,
    createdAt: run.createdAt,
    current: run.status,
    verdict: verdict.allowed ? { allowed: true } : { allowed: false, message: verdict.message },
    cancel: verdict.spec?.cancel === true,
    pendingTimeoutSeconds: run.timing.pendingTimeoutSeconds,
    podName: childName(run.ref.name, run.ref.uid),
    ...observed,
    now: run.timing.now,
  });
  await writeStatus(deps, { kind: SANDBOX_RUN, key, raw: run.raw, before: run.status, after: status });
  await reportTransition(deps, {
    run: run.ref,
    createdAt: run.createdAt,
    annotations: run.raw.metadata?.annotations,
    before: run.status,
    after: status,
    effective: verdict.allowed ? verdict.effective : undefined,
    runnerDurationMs: observed.pod?.terminated?.report?.durationMs,
  });
  const after = requeueAfterMs(status, run.timing);
  if (!status.phase || !isTerminal(status.phase)) return { requeueAfterMs: after };
  return { requeueAfterMs: earliest(after, await stopPod(deps, run.ref)) };
}

/** The children of an allowed run, made when missing; of a cancelled one, only a pod that finished. */
function observeChildren(deps: ReconcileDeps, run: RunView, verdict: RunVerdict): Promise<Observed> {
  if (!verdict.allowed) return Promise.resolve(NOTHING_SEEN);
  if (verdict.spec.cancel === true) return observeForCancel(deps, run);
  return ensureRunChildren(
    deps,
    { ...run.ref, podRecorded: run.status.podName !== undefined },
    verdict.effective,
    verdict.job,
  );
}

/** Cancelling: the pod's result if it already finished (the program won the race), else nothing. */
async function observeForCancel(deps: ReconcileDeps, run: RunView): Promise<Observed> {
  const pod = deps.pods.get(run.ref.namespace, childName(run.ref.name, run.ref.uid));
  if (pod && isPodFinished(observePod(pod))) return observeRunPod(deps, run.ref, pod);
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
  });
}
