/**
 * The SandboxRun's conditions, Kubernetes style: each carries the generation it was computed from,
 * and keeps its lastTransitionTime while its status stays the same. Pure.
 *
 * - Admitted: True once the policy allowed the run; False (PolicyDenied) when it refused it.
 * - Started:  True once the program's container started; False with the reason it has not
 *             (ContainerCreating, ImageNotFound, Unschedulable, …) while it waits.
 * - Finished: True once the run reached a terminal phase; its reason is the run's reason.
 *
 * And the three that kstatus-based tools read (Flux, kpt, `kubectl wait --for=condition=Ready`):
 * - Ready:       True when the run Succeeded; False otherwise.
 * - Stalled:     True when it ended any other way (Failed, TimedOut, Rejected, Cancelled): failed.
 * - Reconciling: True while it is Pending or Running: in progress.
 */
import type { Condition } from './sandboxrun.js';

export const ConditionType = {
  Admitted: 'Admitted',
  Started: 'Started',
  Finished: 'Finished',
  Ready: 'Ready',
  Stalled: 'Stalled',
  Reconciling: 'Reconciling',
} as const;
export type ConditionType = (typeof ConditionType)[keyof typeof ConditionType];

export type ConditionInput = Omit<Condition, 'lastTransitionTime'>;

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/**
 * The conditions with `next` set: its lastTransitionTime is `now` if its status changed (or it is
 * new), else the previous one. Other conditions keep their order; a new type is appended.
 */
export function setCondition(
  conditions: readonly Condition[],
  next: ConditionInput,
  now: string,
): Condition[] {
  const prev = findCondition(conditions, next.type);
  const lastTransitionTime = prev && prev.status === next.status ? prev.lastTransitionTime : now;
  const merged: Condition = { ...next, lastTransitionTime };
  return prev ? conditions.map((c) => (c.type === next.type ? merged : c)) : [...conditions, merged];
}

/** Each of `wanted` set in turn on `conditions` (see setCondition). */
export function setConditions(
  conditions: readonly Condition[],
  wanted: readonly ConditionInput[],
  now: string,
): Condition[] {
  return wanted.reduce<Condition[]>((all, next) => setCondition(all, next, now), [...conditions]);
}
