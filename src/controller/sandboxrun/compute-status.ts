/**
 * computeStatus(): the run's status from what the reconciler observed. Pure: time comes in as an
 * argument. A terminal status never changes again (only observedGeneration follows the spec).
 */
import { classify, type RunFacts } from '../../api/outcome.js';
import { isTerminal, type Phase, type Reason } from '../../api/run.js';
import { ConditionType, setConditions, type ConditionInput } from '../../api/v1alpha1/conditions.js';
import type { RunOutputs } from '../../api/outputs.js';
import type { RunOutput, SandboxRunStatus } from '../../api/v1alpha1/sandboxrun.js';
import { NETWORK_NOT_ISOLATED, notIsolatedMessage, refusedInterface } from '../pod/not-isolated.js';
import { isPodFinished, type PodView } from '../pod/observe-pod.js';
import { pendingDeadlineMs, pendingEnd, pendingProblem, type Blocked } from '../pod/pending.js';
import { admittedCondition, kstatusConditions, type Verdict } from '../verdict.js';
import { compact } from '../../shared/compact.js';

export interface StatusInput {
  generation: number;
  createdAt: string;
  current: SandboxRunStatus;
  verdict: Verdict;
  cancel: boolean;
  pendingTimeoutSeconds: number;
  /** The deterministic name of the run's pod. */
  podName: string;
  pod: PodView | undefined;
  blocked: Blocked | undefined;
  /** The pod was created once and is gone now. */
  podLost: boolean;
  output: RunOutput | undefined;
  /** The files the run returned (kept in its ConfigMap), once its pod has finished. */
  outputs?: RunOutputs | undefined;
  /** How the run is served, once it is: a pool pod (`warm`, with its pool) or a pod of its own. */
  served?: { served: 'warm'; pool: string | undefined } | undefined;
  now: string;
}

/** The runner's own failure in --plain mode (it could not start the program), with no exit report. */
export const RUNNER_FAILED_EXIT = 125;

interface Outcome {
  phase: Phase;
  reason?: Reason | undefined;
  message: string;
  exitCode?: number | undefined;
  startTime?: string | undefined;
  completionTime?: string | undefined;
  output?: RunOutput | undefined;
  outputs?: RunOutputs | undefined;
  started: { status: 'True' | 'False'; reason: string; message: string };
}

export function computeStatus(i: StatusInput): SandboxRunStatus {
  if (i.current.phase && isTerminal(i.current.phase))
    return { ...i.current, observedGeneration: i.generation };
  const o = decide(i);
  const terminal = isTerminal(o.phase);
  const observedGeneration = i.generation;
  const reason = terminal ? (o.reason ?? o.phase) : o.phase;
  const succeeded = o.phase === 'Succeeded';
  // Finished, and the three that kstatus tools read (Ready, Stalled, Reconciling), all with the run's reason.
  const wanted: ConditionInput[] = [
    admittedCondition(i.verdict, observedGeneration, 'run'),
    { type: ConditionType.Started, ...o.started, observedGeneration },
    {
      type: ConditionType.Finished,
      status: terminal ? 'True' : 'False',
      reason,
      message: o.message,
      observedGeneration,
    },
    ...kstatusConditions({
      ready: succeeded,
      stalled: terminal && !succeeded,
      reconciling: !terminal,
      reason,
      message: o.message,
      observedGeneration,
    }),
  ];
  const conditions = setConditions(i.current.conditions ?? [], wanted, i.now);
  return compact({
    phase: o.phase,
    reason: o.reason,
    message: o.message,
    exitCode: o.exitCode,
    podName: i.pod || i.current.podName ? i.podName : undefined,
    ...servedBy(i),
    startTime: o.startTime,
    completionTime: o.completionTime,
    conditions,
    output: o.output,
    outputs: o.outputs,
    observedGeneration,
  });
}

/** `served` (and `pool`) once the run has a pod: a pool pod's, or a pod of its own. */
function servedBy(i: StatusInput): Pick<SandboxRunStatus, 'served' | 'pool'> {
  if (i.served) return { served: 'warm', pool: i.served.pool };
  if (i.current.served) return { served: i.current.served, pool: i.current.pool };
  return i.pod || i.current.podName ? { served: 'cold' } : {};
}

function decide(i: StatusInput): Outcome {
  if (!i.verdict.allowed) {
    return {
      ...ended(i, 'Rejected', 'PolicyDenied', i.verdict.message),
      started: notStarted('PolicyDenied', 'the policy refused the run'),
    };
  }
  if (i.pod && isPodFinished(i.pod)) return finished(i, i.pod);
  if (i.cancel) return ended(i, 'Cancelled', 'Cancelled', 'the run was cancelled (spec.cancel)');
  if (i.podLost)
    return ended(i, 'Failed', 'BackendError', `pod ${i.podName} was deleted before the run finished`);
  if (i.pod?.phase === 'Running') {
    return {
      phase: 'Running',
      message: 'the program is running',
      startTime: i.pod.startedAt ?? i.current.startTime,
      started: { status: 'True', reason: 'ContainerStarted', message: `pod ${i.podName} is running` },
    };
  }
  return pending(i);
}

const notStarted = (reason: string, message: string): Outcome['started'] => ({
  status: 'False',
  reason,
  message,
});

/** A terminal outcome decided by the operator (not by the program's exit). */
function ended(i: StatusInput, phase: Phase, reason: Reason, message: string): Outcome {
  return {
    phase,
    reason,
    message,
    startTime: i.current.startTime,
    completionTime: i.now,
    started: i.current.startTime
      ? { status: 'True', reason: 'ContainerStarted', message: `pod ${i.podName} started` }
      : notStarted(reason, message),
  };
}

/** An end that the program's exit does not explain: an eviction, or the runner's refusal of the sandbox. */
type OtherEnd = Pick<Outcome, 'phase' | 'reason' | 'message'> & Partial<Pick<Outcome, 'started'>>;

function endedOtherwise(pod: PodView): OtherEnd | undefined {
  if (pod.reason === 'Evicted')
    return {
      phase: 'Failed',
      reason: 'Error',
      message: `the pod was evicted: ${pod.message ?? 'no detail'}`,
    };
  const iface = refusedInterface(pod);
  if (iface === undefined) return undefined;
  const message = notIsolatedMessage(iface, 'run');
  return {
    phase: 'Failed',
    reason: 'BackendError',
    message,
    started: notStarted(NETWORK_NOT_ISOLATED, message),
  };
}

function finished(i: StatusInput, pod: PodView): Outcome {
  const t = pod.terminated;
  const exitCode = t?.report?.exitCode ?? t?.exitCode;
  const startTime = t?.startedAt ?? pod.startedAt ?? i.current.startTime;
  const base = {
    exitCode,
    startTime,
    completionTime: t?.finishedAt ?? i.now,
    output: i.output,
    outputs: i.outputs,
    started: startTime
      ? { status: 'True' as const, reason: 'ContainerStarted', message: `pod ${i.podName} started` }
      : notStarted('PodFailed', pod.message ?? 'the pod ended before the program started'),
  };
  const ended = endedOtherwise(pod);
  if (ended) return { ...base, ...ended };
  const { phase, reason, message } = classify(podFacts(pod));
  return { ...base, phase, reason, message: message ?? 'the program exited with code 0' };
}

/** Why the program did not run to an exit of its own, when the pod says so. */
function podFailure(pod: PodView): string | undefined {
  const t = pod.terminated;
  if (!t)
    return `the pod ended without running the program (${pod.reason ?? pod.phase}: ${pod.message ?? 'no detail'})`;
  if (!t.report && t.failure !== undefined) return `the runner could not start the program: ${t.failure}`;
  if (!t.report && t.exitCode === RUNNER_FAILED_EXIT)
    return 'the runner could not start the program; see the pod log';
  return undefined;
}

/** The run's facts as the shared classifier takes them: the runner's report first, the pod second. */
export function podFacts(pod: PodView): RunFacts {
  const t = pod.terminated;
  const report = t?.report;
  const failure = podFailure(pod);
  return {
    exitCode: report?.exitCode ?? t?.exitCode ?? null,
    timedOut: report?.timedOut === true || pod.reason === 'DeadlineExceeded',
    oomKilled: report?.oomKilled === true || t?.reason === 'OOMKilled',
    cancelled: false,
    ...(failure ? { failure } : {}),
  };
}

function pending(i: StatusInput): Outcome {
  const problem = pendingProblem(i.pod, i.blocked);
  const end = pendingEnd(problem, i, 'start');
  if (end) return ended(i, 'Failed', end.reason, end.message);
  return waiting(i, problem);
}

/** Still pending: what the program waits for. */
function waiting(i: StatusInput, problem: Blocked | undefined): Outcome {
  const waitingFor = i.pod?.waiting?.reason ?? (i.pod ? 'PodPending' : 'PodNotCreated');
  const detail =
    problem?.message ?? (i.pod ? `pod ${i.podName} is ${waitingFor}` : `creating pod ${i.podName}`);
  return {
    phase: 'Pending',
    message: `waiting for the program to start: ${detail}`,
    started: notStarted(problem?.reason ?? waitingFor, detail),
  };
}

/**
 * When the run's end was recorded: its Finished condition's turn to True, which is what the TTL
 * after finishing counts from (as Kubernetes' TTL-after-finished controller counts a Job's from
 * its Complete or Failed condition). Not completionTime, the program's own end: a pod that ended
 * while the apiserver was away (or the operator down) ends earlier than anyone could read it, and
 * counting from then could delete the record as soon as it is written, before the gateway
 * following the run has seen how it ended. completionTime for a status without the condition.
 */
export function finishRecordedAt(status: SandboxRunStatus): string | undefined {
  const finished = status.conditions?.find((c) => c.type === ConditionType.Finished && c.status === 'True');
  return finished?.lastTransitionTime ?? status.completionTime;
}

/** When the run needs another look even if nothing changes: the pending deadline, or its TTL. */
export function requeueAfterMs(
  status: SandboxRunStatus,
  input: {
    createdAt: string;
    pendingTimeoutSeconds: number;
    ttlSecondsAfterFinished: number | undefined;
    now: string;
  },
): number | undefined {
  const now = Date.parse(input.now);
  if (status.phase === 'Pending') return pendingDeadlineMs(input);
  const ended = finishRecordedAt(status);
  if (status.phase && isTerminal(status.phase) && input.ttlSecondsAfterFinished !== undefined && ended) {
    return Math.max(0, Date.parse(ended) + input.ttlSecondsAfterFinished * 1000 - now);
  }
  return undefined;
}
