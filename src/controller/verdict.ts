/**
 * The policy's verdict on an object, as every kind reports it: the violations named by the spec's
 * own fields (the request says `runtime`, the spec `runtimeClassName`), one message naming each,
 * and the Admitted condition. Pure.
 */
import { ConditionType, type ConditionInput } from '../api/v1alpha1/conditions.js';
import type { Violation } from '../shared/errors.js';

/** The verdict as a status reports it. */
export type Verdict = { allowed: true } | { allowed: false; message: string };

export interface Denial<S> {
  allowed: false;
  spec: S | undefined;
  violations: Violation[];
  message: string;
}

export function describeViolations(violations: readonly Violation[]): string {
  return violations
    .map((v) => `${v.field}: ${v.message}${v.limit !== undefined ? ` (limit: ${v.limit})` : ''}`)
    .join('; ');
}

/** A violation of the request, named as the spec spells the field. */
export const specField = (v: Violation): Violation =>
  v.field === 'runtime' ? { ...v, field: 'runtimeClassName' } : v;

export function denied<S>(spec: S | undefined, what: string, violations: Violation[]): Denial<S> {
  const named = violations.map(specField);
  return { allowed: false, spec, violations: named, message: `${what}: ${describeViolations(named)}` };
}

/** The Admitted condition: the policy's verdict on `noun` (the run, the session). */
export function admittedCondition(
  verdict: Verdict,
  observedGeneration: number,
  noun: string,
): ConditionInput {
  return verdict.allowed
    ? {
        type: ConditionType.Admitted,
        status: 'True',
        reason: 'PolicyAllowed',
        message: `the policy allows the ${noun}`,
        observedGeneration,
      }
    : {
        type: ConditionType.Admitted,
        status: 'False',
        reason: 'PolicyDenied',
        message: verdict.message,
        observedGeneration,
      };
}

/** Ready, Stalled and Reconciling, the conditions kstatus tools read, all with the phase's reason. */
export function kstatusConditions(s: {
  ready: boolean;
  stalled: boolean;
  reconciling: boolean;
  reason: string;
  message: string;
  observedGeneration: number;
}): ConditionInput[] {
  const one = (type: ConditionType, on: boolean): ConditionInput => ({
    type,
    status: on ? 'True' : 'False',
    reason: s.reason,
    message: s.message,
    observedGeneration: s.observedGeneration,
  });
  return [
    one(ConditionType.Ready, s.ready),
    one(ConditionType.Stalled, s.stalled),
    one(ConditionType.Reconciling, s.reconciling),
  ];
}
