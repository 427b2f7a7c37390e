/**
 * Why an owner's pod has not started, whatever kind owns it: what keeps the pod from being created
 * (a refusal, a missing RuntimeClass) or from starting (no image, unschedulable), and whether the
 * owner's pending timeout has run out. Pure.
 */
import type { Reason } from '../../api/run.js';
import { IMAGE_MISSING, IMAGE_MISSING_FOR_GOOD, type PodView } from './observe-pod.js';

/** What keeps the pod from being created or from starting. */
export interface Blocked {
  reason: Extract<
    Reason,
    'ImageNotFound' | 'RuntimeClassNotFound' | 'QuotaExceeded' | 'Unschedulable' | 'BackendError'
  >;
  message: string;
  /** Waiting cannot fix it: the owner fails now instead of at the pending timeout. */
  permanent: boolean;
}

/** Why a pending pod has not started, if it says. */
export function pendingProblem(pod: PodView | undefined, blocked: Blocked | undefined): Blocked | undefined {
  if (blocked) return blocked;
  if (!pod) return undefined;
  if (pod.waiting && IMAGE_MISSING.has(pod.waiting.reason)) {
    return {
      reason: 'ImageNotFound',
      message: `${pod.waiting.reason}: ${pod.waiting.message}`.trim(),
      permanent: IMAGE_MISSING_FOR_GOOD.has(pod.waiting.reason),
    };
  }
  if (pod.unschedulable) return { reason: 'Unschedulable', message: pod.unschedulable, permanent: false };
  return undefined;
}

/** How a pod that is not up yet ends its owner, if it does: at once for a permanent problem, else at the timeout. */
export type PendingEnd = { reason: Blocked['reason'] | 'PendingTimeout'; message: string };

export function pendingEnd(
  problem: Blocked | undefined,
  timing: { createdAt: string; pendingTimeoutSeconds: number; now: string },
  what: string,
): PendingEnd | undefined {
  if (problem?.permanent) return { reason: problem.reason, message: problem.message };
  const elapsed = (Date.parse(timing.now) - Date.parse(timing.createdAt)) / 1000;
  if (elapsed < timing.pendingTimeoutSeconds) return undefined;
  const why = `the pod did not ${what} within ${timing.pendingTimeoutSeconds}s`;
  return problem
    ? { reason: problem.reason, message: `${why}: ${problem.message}` }
    : { reason: 'PendingTimeout', message: why };
}

/** When the pending timeout runs out (ms from now, at least 0). */
export function pendingDeadlineMs(timing: {
  createdAt: string;
  pendingTimeoutSeconds: number;
  now: string;
}): number {
  return Math.max(
    0,
    Date.parse(timing.createdAt) + timing.pendingTimeoutSeconds * 1000 - Date.parse(timing.now),
  );
}
