/**
 * computeSandboxStatus(): the session's status from what the reconciler observed. Pure: time comes
 * in as an argument. Creating → Ready (the pod is Ready and its runner answered: its ready frame
 * opens the pod's log; it waits on its stdin) →
 * Expired (TTLExpired, IdleExpired) | Deleted (spec.cancel) | Failed (PolicyDenied, PendingTimeout,
 * ImageNotFound, Unschedulable, OOMKilled, ContainerFailed, RunnerGone, …). An ended status never
 * changes again (only observedGeneration follows the spec).
 */
import { isSessionEnded, type SessionReason, type SessionState } from '../../api/session.js';
import { setConditions, type ConditionInput } from '../../api/v1alpha1/conditions.js';
import { IDLE_SLACK_SECONDS, type SandboxStatus } from '../../api/v1alpha1/sandbox.js';
import { sessionEnd } from '../../runner/session-end.js';
import { notIsolatedMessage, refusedInterface } from '../pod/not-isolated.js';
import { isPodFinished, type PodView } from '../pod/observe-pod.js';
import {
  pendingDeadlineMs,
  pendingEnd,
  pendingProblem,
  type Blocked,
  type PendingEnd,
} from '../pod/pending.js';
import { earliest, msUntil } from '../lifecycle.js';
import { admittedCondition, kstatusConditions, type Verdict } from '../verdict.js';
import { compact } from '../../shared/compact.js';

export interface SandboxStatusInput {
  generation: number;
  createdAt: string;
  current: SandboxStatus;
  verdict: Verdict;
  cancel: boolean;
  pendingTimeoutSeconds: number;
  /** The session's whole lifetime after policy (undefined when the policy refused it). */
  ttlSeconds: number | undefined;
  /** From the spec only: a Sandbox without one never idles out (kubectl exec is not activity). */
  idleTimeoutSeconds: number | undefined;
  podName: string;
  pod: PodView | undefined;
  blocked: Blocked | undefined;
  /** The pod was created once and is gone now. */
  podLost: boolean;
  /** The SandboxPool whose pod this pass claimed, when it claimed one. */
  claimedFrom?: string | undefined;
  /** The session Lease's renewTime: the last activity through sandpit. */
  renewTime: string | undefined;
  /** The runner's ready frame is at the start of the pod's log (read once its pod is Ready). */
  runnerAnswered: boolean;
  now: string;
}

interface Outcome {
  phase: SessionState;
  reason?: SessionReason | undefined;
  message: string;
}

const iso = (t: string): string => new Date(t).toISOString();

/** When the session reaches its TTL. */
export function expiresAt(createdAt: string, ttlSeconds: number | undefined): string | undefined {
  return ttlSeconds === undefined
    ? undefined
    : new Date(Date.parse(createdAt) + ttlSeconds * 1000).toISOString();
}

/** When an idle session ends: lastActivity (else readyTime) + idleTimeoutSeconds + the slack. */
export function idleExpiresAt(
  status: Pick<SandboxStatus, 'readyTime' | 'lastActivity'>,
  idleTimeoutSeconds: number | undefined,
): string | undefined {
  const since = status.lastActivity ?? status.readyTime;
  if (idleTimeoutSeconds === undefined || !since) return undefined;
  return new Date(Date.parse(since) + (idleTimeoutSeconds + IDLE_SLACK_SECONDS) * 1000).toISOString();
}

/** Whether a pool's pod serves the session (recorded once its pod is known). */
function servedBy(i: SandboxStatusInput): Pick<SandboxStatus, 'served' | 'pool'> {
  if (i.current.served) return { served: i.current.served, pool: i.current.pool };
  if (i.claimedFrom) return { served: 'warm', pool: i.claimedFrom };
  return { served: i.pod ? 'cold' : undefined };
}

export function computeSandboxStatus(i: SandboxStatusInput): SandboxStatus {
  const observedGeneration = i.generation;
  if (i.current.phase && isSessionEnded(i.current.phase)) return { ...i.current, observedGeneration };
  const lastActivity = i.renewTime ? iso(i.renewTime) : i.current.lastActivity;
  const times = {
    expiresAt: expiresAt(i.createdAt, i.ttlSeconds) ?? i.current.expiresAt,
    readyTime: i.current.readyTime,
    lastActivity,
  };
  const o = decide(i, times);
  const ended = isSessionEnded(o.phase);
  const readyTime = times.readyTime ?? (o.phase === 'Ready' ? i.now : undefined);
  const reason = o.reason ?? o.phase;
  const wanted: ConditionInput[] = [
    admittedCondition(i.verdict, observedGeneration, 'session'),
    ...kstatusConditions({
      ready: o.phase === 'Ready',
      stalled: o.phase === 'Failed',
      reconciling: o.phase === 'Creating',
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
    podName: i.pod || i.current.podName ? i.podName : undefined,
    ...servedBy(i),
    readyTime,
    expiresAt: times.expiresAt,
    lastActivity,
    finishedTime: ended ? i.now : undefined,
    conditions,
    observedGeneration,
  });
}

type Times = Pick<SandboxStatus, 'expiresAt' | 'readyTime' | 'lastActivity'>;

function decide(i: SandboxStatusInput, t: Times): Outcome {
  if (!i.verdict.allowed) return { phase: 'Failed', reason: 'PolicyDenied', message: i.verdict.message };
  if (i.cancel)
    return { phase: 'Deleted', reason: 'Deleted', message: 'the session was deleted (spec.cancel)' };
  if (i.pod && isPodFinished(i.pod)) return podEnded(i.pod);
  return expired(i, t) ?? alive(i, t);
}

/** The session's time is up: its TTL, or its idle timeout (only a spec that sets one). */
function expired(i: SandboxStatusInput, t: Times): Outcome | undefined {
  const now = Date.parse(i.now);
  if (t.expiresAt && now >= Date.parse(t.expiresAt))
    return {
      phase: 'Expired',
      reason: 'TTLExpired',
      message: `the session reached its ttlSeconds (${i.ttlSeconds}s)`,
    };
  const idleAt = idleExpiresAt(t, i.idleTimeoutSeconds);
  if (!idleAt || now < Date.parse(idleAt)) return undefined;
  return {
    phase: 'Expired',
    reason: 'IdleExpired',
    message: `no activity through sandpit since ${t.lastActivity ?? t.readyTime} (idleTimeoutSeconds ${i.idleTimeoutSeconds})`,
  };
}

/** Its pod lives: Ready once the runner answered, Failed when the pod went, else Creating. */
function alive(i: SandboxStatusInput, t: Times): Outcome {
  if (i.podLost || i.pod?.deleting)
    return {
      phase: 'Failed',
      reason: 'RunnerGone',
      message: `pod ${i.podName} was deleted while the session lived`,
    };
  const podReady = i.pod?.phase === 'Running' && i.pod.ready;
  if (podReady && (t.readyTime || i.runnerAnswered))
    return { phase: 'Ready', message: `the session is ready in pod ${i.podName}` };
  if (t.readyTime)
    return { phase: 'Failed', reason: 'RunnerGone', message: `pod ${i.podName} is no longer ready` };
  if (podReady)
    return { phase: 'Creating', message: `pod ${i.podName} is ready; waiting for its runner to answer` };
  return creating(i);
}

/** The blocking reasons of a pod in the session's words. */
function sessionReason(reason: PendingEnd['reason']): SessionReason {
  return reason === 'ImageNotFound' || reason === 'Unschedulable' || reason === 'PendingTimeout'
    ? reason
    : 'BackendError';
}

function creating(i: SandboxStatusInput): Outcome {
  const problem = pendingProblem(i.pod, i.blocked);
  const end = pendingEnd(problem, i, 'become ready');
  if (end) return { phase: 'Failed', reason: sessionReason(end.reason), message: end.message };
  const waitingFor = i.pod?.waiting?.reason ?? (i.pod ? 'PodPending' : 'PodNotCreated');
  const detail =
    problem?.message ?? (i.pod ? `pod ${i.podName} is ${waitingFor}` : `creating pod ${i.podName}`);
  return {
    phase: 'Creating',
    ...(problem ? { reason: sessionReason(problem.reason) } : {}),
    message: `waiting for the session to be ready: ${detail}`,
  };
}

/** A pod that finished: why, from the pod's reason, the runner's refusal and its exit status. */
function podEnded(pod: PodView): Outcome {
  const iface = refusedInterface(pod);
  if (iface !== undefined)
    return { phase: 'Failed', reason: 'BackendError', message: notIsolatedMessage(iface, 'session') };
  if (pod.reason === 'DeadlineExceeded')
    return { phase: 'Expired', reason: 'TTLExpired', message: 'the pod reached its activeDeadlineSeconds' };
  if (pod.reason === 'Evicted')
    return {
      phase: 'Failed',
      reason: 'ContainerFailed',
      message: `the pod was evicted: ${pod.message ?? 'no detail'}`,
    };
  const t = pod.terminated;
  if (!t) {
    return {
      phase: 'Failed',
      reason: 'ContainerFailed',
      message: `the pod ended without its runner (${pod.reason ?? pod.phase}: ${pod.message ?? 'no detail'})`,
    };
  }
  const end = sessionEnd({ exitCode: t.exitCode, oomKilled: t.reason === 'OOMKilled' });
  // Nobody opened the session within its TTL (the runner waits that long; kubectl exec does not open it).
  if (!end) return { phase: 'Expired', reason: 'TTLExpired', message: 'the session reached its ttlSeconds' };
  const phase: SessionState =
    end.reason === 'TTLExpired' || end.reason === 'IdleExpired'
      ? 'Expired'
      : end.reason === 'Deleted'
        ? 'Deleted'
        : 'Failed';
  return { phase, reason: end.reason, message: end.message };
}

/** When the session needs another look even if nothing changes: pending deadline, TTL, idle end, TTL after finishing. */
export function sandboxRequeueMs(
  status: SandboxStatus,
  input: {
    createdAt: string;
    pendingTimeoutSeconds: number;
    idleTimeoutSeconds: number | undefined;
    ttlSecondsAfterFinished: number | undefined;
    now: string;
  },
): number | undefined {
  const at = (t: string | undefined): number | undefined => (t ? msUntil(t, 0, input.now) : undefined);
  if (status.phase && isSessionEnded(status.phase)) {
    return input.ttlSecondsAfterFinished === undefined || !status.finishedTime
      ? undefined
      : msUntil(status.finishedTime, input.ttlSecondsAfterFinished, input.now);
  }
  const expiry = at(status.expiresAt);
  if (status.phase === 'Ready') return earliest(expiry, at(idleExpiresAt(status, input.idleTimeoutSeconds)));
  return earliest(expiry, pendingDeadlineMs(input));
}
