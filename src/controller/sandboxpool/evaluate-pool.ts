/**
 * evaluatePool(): the policy's verdict on a SandboxPool, and the shape its pods have. The pool's
 * spec is read as a run request (its template, image, resources and runtime, with a placeholder
 * command) and given to the same evaluate() a SandboxRun gets, so a run and a pool asking for the
 * same things have the same effective shape, hence the same shape label (src/policy/shape.ts).
 * A pool the policy refuses gets no pods. Pure.
 */
import { shapeLabelValue } from '../../api/v1alpha1/labels.js';
import { RunRequestSchema } from '../../api/run.js';
import { issuesToViolations } from '../../api/validate.js';
import {
  SandboxPoolSpecSchema,
  type PoolMode,
  type SandboxPoolSpec,
} from '../../api/v1alpha1/sandboxpool.js';
import { evaluate, type EffectiveSpec } from '../../policy/evaluate.js';
import type { Policy } from '../../policy/policy.js';
import { poolKey, shapeOf, type SandboxShape } from '../../policy/shape.js';
import { denied, type Denial } from '../verdict.js';

/** The command of the run request a pool is evaluated as: no job of its own, only its shape counts. */
export const PLACEHOLDER_COMMAND = ['true'];

export type PoolVerdict =
  | {
      allowed: true;
      spec: SandboxPoolSpec;
      effective: EffectiveSpec;
      /** The LABEL_POOL_SHAPE of its pods: the hash of the shape key, mode included. */
      shapeLabel: string;
    }
  | Denial<SandboxPoolSpec>;

export function evaluatePool(rawSpec: unknown, policy: Policy): PoolVerdict {
  const parsed = SandboxPoolSpecSchema.safeParse(rawSpec ?? {});
  if (!parsed.success) return denied(undefined, 'invalid spec', issuesToViolations(parsed.error.issues));
  const spec = parsed.data;
  const request = RunRequestSchema.safeParse({
    template: spec.template,
    image: spec.image,
    resources: spec.resources,
    runtime: spec.runtimeClassName,
    command: PLACEHOLDER_COMMAND,
    // Only the mode: a run's own allowlist is bound by its claim.
    ...(spec.egress === 'allowlist' ? { network: { egress: 'allowlist' } } : {}),
  });
  if (!request.success) return denied(spec, 'invalid spec', issuesToViolations(request.error.issues));
  const evaluation = evaluate(request.data, policy);
  if (!evaluation.ok) return denied(spec, 'denied by policy', evaluation.violations);
  return {
    allowed: true,
    spec,
    effective: evaluation.spec,
    shapeLabel: poolShapeLabel(evaluation.spec, spec.mode),
  };
}

/** The shape label (LABEL_POOL_SHAPE) of an effective spec in a mode: what a claim looks for. */
export const poolShapeLabel = (effective: SandboxShape, mode: PoolMode): string =>
  shapeLabelValue(poolKey(shapeOf(effective), mode));
