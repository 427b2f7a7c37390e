/**
 * observePod(): what a Pod says about its run, read once from its status. Pure.
 */
import { SANDBOX_CONTAINER } from '../../api/v1alpha1/labels.js';
import type { ContainerStatus, Pod } from '../../kube/objects.js';
import { parseExitReport, parseRunnerFailure, type ExitReport } from '../../runner/protocol.js';

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
  /** The runner's own failure from the termination log (the program never ran), when it wrote one. */
  failure: string | undefined;
}

export interface PodView {
  name: string;
  uid: string;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';
  /** Pod-level reason: DeadlineExceeded (activeDeadlineSeconds), Evicted, … */
  reason: string | undefined;
  message: string | undefined;
  deleting: boolean;
  /** The pod's Ready condition is True (its container runs; sandbox pods have no readiness probe). */
  ready: boolean;
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

const PHASES: ReadonlySet<string> = new Set(['Pending', 'Running', 'Succeeded', 'Failed']);

function podPhase(phase: string | undefined): PodView['phase'] {
  return phase !== undefined && PHASES.has(phase) ? (phase as PodView['phase']) : 'Unknown';
}

/** The scheduler's refusal, from the PodScheduled condition. */
function unschedulable(pod: Pod): string | undefined {
  const scheduled = pod.status?.conditions?.find((x) => x.type === 'PodScheduled');
  if (scheduled?.status !== 'False' || scheduled.reason !== 'Unschedulable') return undefined;
  return scheduled.message ?? 'unschedulable';
}

function waiting(c: ContainerStatus | undefined): PodView['waiting'] {
  const w = c?.state?.waiting;
  return w?.reason ? { reason: w.reason, message: w.message ?? '' } : undefined;
}

function terminated(c: ContainerStatus | undefined): Terminated | undefined {
  const term = c?.state?.terminated;
  if (!term) return undefined;
  return {
    exitCode: term.exitCode,
    reason: term.reason || undefined,
    startedAt: toTime(term.startedAt),
    finishedAt: toTime(term.finishedAt),
    report: terminationReport(term.message),
    failure: term.message ? parseRunnerFailure(term.message) : undefined,
  };
}

/** When the program's container started (running, or already terminated). */
function startedAt(c: ContainerStatus | undefined): string | undefined {
  return toTime(c?.state?.running?.startedAt) ?? toTime(c?.state?.terminated?.startedAt);
}

/**
 * A pool pod serving a job the operator wrote, as far as the operator knows without its status:
 * running since `startedAt` (the claim). Pure.
 */
export function servingView(pod: { name: string; uid: string }, startedAt: string | undefined): PodView {
  return {
    name: pod.name,
    uid: pod.uid,
    phase: 'Running',
    reason: undefined,
    message: undefined,
    deleting: false,
    ready: true,
    waiting: undefined,
    unschedulable: undefined,
    startedAt,
    terminated: undefined,
  };
}

export function observePod(pod: Pod): PodView {
  const c = sandboxStatus(pod);
  const { metadata = {}, status = {} } = pod;
  return {
    name: metadata.name ?? '',
    uid: metadata.uid ?? '',
    phase: podPhase(status.phase),
    reason: status.reason || undefined,
    message: status.message || undefined,
    deleting: metadata.deletionTimestamp !== undefined,
    ready: status.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') === true,
    waiting: waiting(c),
    unschedulable: unschedulable(pod),
    startedAt: startedAt(c),
    terminated: terminated(c),
  };
}

export const isPodFinished = (p: PodView): boolean => p.phase === 'Succeeded' || p.phase === 'Failed';
