/**
 * The steps every kind's reconciler shares around its own status logic: reading a number from a
 * spec that may be invalid, the one resourceVersion-guarded status write per pass (recorded in the
 * status overlay), stopping the pod of an owner that has ended, and the pass over an ended owner
 * (its pod stopped, its TTL after finishing, its observedGeneration).
 */
import { isDeepStrictEqual } from 'node:util';
import { childName } from '../api/v1alpha1/labels.js';
import type { CustomResource, KubeClient } from '../kube/client.js';
import { isNotFound } from '../kube/errors.js';
import type { KubeObject, Pod } from '../kube/objects.js';
import type { Store } from '../kube/store.js';
import type { Logger } from '../observability/logger.js';
import type { ObjectRef } from './children.js';
import type { ReconcileResult } from './kind-controller.js';
import { podStopStep, type FinishedPod } from './pod/pod-stop.js';
import type { StatusOverlay } from './status-overlay.js';

/** A whole-number field (≥ 0) of a raw spec, read leniently: a rejected spec still has a TTL. */
export function specNumber(spec: unknown, field: string): number | undefined {
  const value = (spec as Record<string, unknown> | undefined)?.[field];
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

export function earliest(...times: (number | undefined)[]): number | undefined {
  const set = times.filter((t): t is number => t !== undefined);
  return set.length ? Math.min(...set) : undefined;
}

/** ms from `now` until `from` + `seconds` (at least 0). */
export const msUntil = (from: string, seconds: number, now: string): number =>
  Math.max(0, Date.parse(from) + seconds * 1000 - Date.parse(now));

export interface StatusWriteDeps {
  kube: KubeClient;
  overlay: StatusOverlay;
}

/**
 * Writes `status` if it differs from what the object has: one PUT of …/status with the
 * resourceVersion it was read at, so a stale pass fails with Conflict (and is retried) instead of
 * overwriting. Returns whether it wrote.
 */
export interface StatusChange<S> {
  kind: CustomResource;
  key: string;
  /** The object as this pass read it (its resourceVersion guards the write). */
  raw: KubeObject;
  before: S;
  after: S;
}

export async function writeStatus<S>(deps: StatusWriteDeps, c: StatusChange<S>): Promise<boolean> {
  if (isDeepStrictEqual(c.after, c.before)) return false;
  const written = await deps.kube.replaceObjectStatus(c.kind, { ...c.raw, status: c.after });
  deps.overlay.record(c.key, c.raw.metadata?.resourceVersion, written);
  return true;
}

export interface StopDeps {
  kube: KubeClient;
  pods: Store<Pod>;
  logger: Logger;
  now: () => Date;
}

/** Stops the pod of an ended owner; returns when to look again while its deletion is pending. */
export async function stopPod(
  deps: StopDeps,
  owner: ObjectRef,
  finished: FinishedPod = 'keep',
  podName: string = childName(owner.name, owner.uid),
): Promise<number | undefined> {
  const pod = deps.pods.get(owner.namespace, podName);
  const step = podStopStep(pod, owner.uid, deps.now(), finished);
  if (step.action !== 'delete' || !pod?.metadata?.uid) return step.recheckMs;
  const name = pod.metadata.name ?? '';
  try {
    await deps.kube.deletePod(owner.namespace, name, pod.metadata.uid);
    deps.logger.info(
      { object: `${owner.kind} ${owner.namespace}/${owner.name}`, pod: name },
      `Deleted Pod of ended ${owner.kind}`,
    );
  } catch (e) {
    if (!isNotFound(e)) throw e;
    return undefined;
  }
  return step.recheckMs;
}

export interface EndedOwner<S extends { observedGeneration?: number | undefined }> {
  kind: CustomResource;
  key: string;
  ref: ObjectRef;
  raw: KubeObject;
  generation: number;
  status: S;
  /** When it ended (its status says). */
  endedAt: string | undefined;
  ttlSecondsAfterFinished: number | undefined;
  now: string;
  /** Whether a pod that finished by itself stays until the owner goes (the default) or is deleted. */
  finishedPod?: FinishedPod;
  /** The owner's pod, when it is not the one under the deterministic name (a claimed pool pod). */
  podName?: string | undefined;
}

/** An owner that has ended: its pod must not keep running; the TTL after finishing deletes it. */
export async function endedPass<S extends { observedGeneration?: number | undefined }>(
  deps: StopDeps & StatusWriteDeps,
  o: EndedOwner<S>,
): Promise<ReconcileResult> {
  const recheckPodMs = await stopPod(deps, o.ref, o.finishedPod, o.podName);
  const ttlAfter =
    o.ttlSecondsAfterFinished === undefined || !o.endedAt
      ? undefined
      : msUntil(o.endedAt, o.ttlSecondsAfterFinished, o.now);
  if (ttlAfter === 0) {
    await deps.kube.deleteObject(o.kind, o.ref);
    deps.logger.info(
      { object: `${o.ref.kind} ${o.key}`, ttlSecondsAfterFinished: o.ttlSecondsAfterFinished },
      `Deleted finished ${o.ref.kind} (TTL)`,
    );
    deps.overlay.forget(o.key);
    return {};
  }
  if (o.status.observedGeneration !== o.generation) {
    const after = { ...o.status, observedGeneration: o.generation };
    await writeStatus(deps, { kind: o.kind, key: o.key, raw: o.raw, before: o.status, after });
  }
  return { requeueAfterMs: earliest(ttlAfter, recheckPodMs) };
}
