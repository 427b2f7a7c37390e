/**
 * reconcileRun(): one level-triggered, idempotent pass over one SandboxRun, by key. It reads the
 * run from the cache, takes the shared policy's verdict on it, makes sure the children exist,
 * computes the status purely, writes it once if it changed (PUT with the resourceVersion, so a
 * stale pass fails with Conflict instead of overwriting), then reports the transition. It never
 * writes the spec, and never touches children it does not control.
 */
import { isDeepStrictEqual } from 'node:util';
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
import { isPodFinished, observePod } from '../pod/observe-pod.js';
import { podStopStep } from '../pod/pod-stop.js';
import type { StatusOverlay } from '../status-overlay.js';
import { computeStatus, requeueAfterMs } from './compute-status.js';
import {
  ensureChildren,
  NOTHING_OBSERVED,
  observeExisting,
  type ChildrenDeps,
  type Observed,
} from './ensure-children.js';
import { evaluateRun, type RunVerdict } from './evaluate-run.js';
import { reportTransition, type ReportDeps } from './report.js';
import { runRef } from './run-ref.js';

export interface RunSettings {
  defaultPendingTimeoutSeconds: number;
  defaultTtlSecondsAfterFinished: number | undefined;
}

export interface ReconcileDeps extends ChildrenDeps, ReportDeps {
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

/** A number field of the raw spec, read leniently (a rejected spec still has a TTL). */
function specNumber(raw: SandboxRun, field: string): number | undefined {
  const value = (raw.spec as Record<string, unknown> | undefined)?.[field];
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
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
      pendingTimeoutSeconds: specNumber(raw, 'pendingTimeoutSeconds') ?? defaultPendingTimeoutSeconds,
      ttlSecondsAfterFinished: specNumber(raw, 'ttlSecondsAfterFinished') ?? defaultTtlSecondsAfterFinished,
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
  await writeStatus(deps, key, run, status);
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
  return { requeueAfterMs: earliest(after, await stopUnfinishedPod(deps, run)) };
}

/** The children of an allowed run, made when missing; of a cancelled one, only a pod that finished. */
function observeChildren(deps: ReconcileDeps, run: RunView, verdict: RunVerdict): Promise<Observed> {
  if (!verdict.allowed) return Promise.resolve(NOTHING_OBSERVED);
  if (verdict.spec.cancel === true) return observeForCancel(deps, run);
  return ensureChildren(
    deps,
    { ...run.ref, podRecorded: run.status.podName !== undefined },
    verdict.effective,
    verdict.job,
  );
}

/** Cancelling: the pod's result if it already finished (the program won the race), else nothing. */
async function observeForCancel(deps: ReconcileDeps, run: RunView): Promise<Observed> {
  const pod = deps.pods.get(run.ref.namespace, childName(run.ref.name, run.ref.uid));
  if (pod && isPodFinished(observePod(pod))) return observeExisting(deps, run.ref, pod);
  return NOTHING_OBSERVED;
}

async function writeStatus(
  deps: ReconcileDeps,
  key: string,
  run: RunView,
  status: SandboxRunStatus,
): Promise<void> {
  if (isDeepStrictEqual(status, run.status)) return;
  const body = { ...run.raw, status };
  const written = await deps.kube.replaceObjectStatus(SANDBOX_RUN, body);
  deps.overlay.record(key, run.raw.metadata?.resourceVersion, written);
}

/** A finished run: its pod must not keep running (cancelled, or failed while pending); TTL clean-up. */
async function finishedRun(deps: ReconcileDeps, key: string, run: RunView): Promise<ReconcileResult> {
  const { timing } = run;
  const recheckPodMs = await stopUnfinishedPod(deps, run);
  const ttlAfter =
    timing.ttlSecondsAfterFinished === undefined ? undefined : requeueAfterMs(run.status, timing);
  const after = earliest(ttlAfter, recheckPodMs);
  if (after === 0) {
    await deps.kube.deleteObject(SANDBOX_RUN, run.ref);
    deps.logger.info(
      { run: key, ttlSecondsAfterFinished: timing.ttlSecondsAfterFinished },
      'Deleted finished SandboxRun (TTL)',
    );
    deps.overlay.forget(key);
    return {};
  }
  if (run.status.observedGeneration !== run.generation) {
    await writeStatus(deps, key, run, { ...run.status, observedGeneration: run.generation });
  }
  return { requeueAfterMs: after };
}

function earliest(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined ? a : Math.min(a, b);
}

/** Stops the pod of a finished run; returns when to look again if its deletion is still pending. */
async function stopUnfinishedPod(deps: ReconcileDeps, run: RunView): Promise<number | undefined> {
  const pod = deps.pods.get(run.ref.namespace, childName(run.ref.name, run.ref.uid));
  const step = podStopStep(pod, run.ref.uid, deps.now());
  if (step.action === 'none' || step.action === 'wait' || !pod?.metadata?.uid) return step.recheckMs;
  const force = step.action === 'force';
  const name = pod.metadata.name ?? '';
  try {
    await deps.kube.deletePod(run.ref.namespace, name, pod.metadata.uid, force ? 0 : 1);
    deps.logger.info(
      { run: `${run.ref.namespace}/${run.ref.name}`, pod: name, force },
      force ? 'Forced deletion of a Pod the kubelet did not confirm' : 'Deleted Pod of finished SandboxRun',
    );
  } catch (e) {
    if (!isNotFound(e)) throw e;
    return undefined;
  }
  return step.recheckMs;
}
