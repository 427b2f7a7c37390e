/**
 * observePod(): what a Pod says about its run, read once from its status. Pure.
 */
import type { ContainerStatus, Pod } from '../kube/objects.js';
import { parseExitReport, type ExitReport } from '../runner/protocol.js';
import { SANDBOX_CONTAINER } from './build-pod.js';

/** Container waiting reasons that mean the image is not there. */
export const IMAGE_MISSING = new Set([
  'ErrImageNeverPull',
  'InvalidImageName',
  'ErrImagePull',
  'ImagePullBackOff',
]);
/** …and those of them that waiting cannot fix. */
export const IMAGE_MISSING_FOR_GOOD = new Set(['ErrImageNeverPull', 'InvalidImageName']);

export interface Terminated {
  exitCode: number;
  reason: string | undefined;
  startedAt: string | undefined;
  finishedAt: string | undefined;
  /** The runner's exit report from the termination log, when it wrote one. */
  report: ExitReport | undefined;
}

export interface PodView {
  name: string;
  uid: string;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';
  /** Pod-level reason: DeadlineExceeded (activeDeadlineSeconds), Evicted, … */
  reason: string | undefined;
  message: string | undefined;
  deleting: boolean;
  waiting: { reason: string; message: string } | undefined;
  unschedulable: string | undefined;
  startedAt: string | undefined;
  terminated: Terminated | undefined;
}

/** A timestamp, or undefined when it is absent or empty. */
const toTime = (value: string | undefined): string | undefined => value || undefined;

/** The runner's exit report from a termination message; undefined when there is none (or it is not one). */
export function terminationReport(text: string | undefined): ExitReport | undefined {
  if (!text) return undefined;
  try {
    return parseExitReport(text);
  } catch {
    return undefined;
  }
}

function sandboxStatus(pod: Pod): ContainerStatus | undefined {
  return pod.status?.containerStatuses?.find((c) => c.name === SANDBOX_CONTAINER);
}

export function observePod(pod: Pod): PodView {
  const status = pod.status;
  const c = sandboxStatus(pod);
  const term = c?.state?.terminated;
  const scheduled = status?.conditions?.find((x) => x.type === 'PodScheduled');
  const phase = status?.phase;
  return {
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    phase:
      phase === 'Running' || phase === 'Succeeded' || phase === 'Failed' || phase === 'Pending'
        ? phase
        : 'Unknown',
    reason: status?.reason || undefined,
    message: status?.message || undefined,
    deleting: pod.metadata?.deletionTimestamp !== undefined,
    waiting: c?.state?.waiting?.reason
      ? { reason: c.state.waiting.reason, message: c.state.waiting.message ?? '' }
      : undefined,
    unschedulable:
      scheduled?.status === 'False' && scheduled.reason === 'Unschedulable'
        ? (scheduled.message ?? 'unschedulable')
        : undefined,
    startedAt: toTime(c?.state?.running?.startedAt) ?? toTime(term?.startedAt),
    terminated: term
      ? {
          exitCode: term.exitCode,
          reason: term.reason || undefined,
          startedAt: toTime(term.startedAt),
          finishedAt: toTime(term.finishedAt),
          report: terminationReport(term.message),
        }
      : undefined,
  };
}

export const isPodFinished = (p: PodView): boolean => p.phase === 'Succeeded' || p.phase === 'Failed';
