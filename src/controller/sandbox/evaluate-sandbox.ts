/**
 * evaluateSandbox(): the authoritative policy verdict on a Sandbox (DESIGN.md §3): its spec is
 * read as the shared session request and given to the same evaluateSession() the gateway uses, so
 * a Sandbox made with kubectl gets exactly the limits one made through sandpit gets. Egress none
 * fails closed as a run's does: unless the cluster is declared to enforce the session's deny-all
 * NetworkPolicy, the session runner refuses a sandbox with any interface but lo before it starts.
 * An egress allowlist is admitted exactly when a run's would be (egressRefusal()). Pure.
 */
import { SessionRequestSchema } from '../../api/session.js';
import { issuesToViolations } from '../../api/validate.js';
import { SandboxSpecSchema, toSessionRequestInput, type SandboxSpec } from '../../api/v1alpha1/sandbox.js';
import type { Policy } from '../../policy/policy.js';
import { evaluateSession, type EffectiveSessionSpec } from '../../policy/session.js';
import { egressRefusal } from '../pod/egress.js';
import type { ClusterFacts } from '../sandboxrun/evaluate-run.js';
import { denied, type Denial } from '../verdict.js';

export type SandboxVerdict =
  | { allowed: true; spec: SandboxSpec; effective: EffectiveSessionSpec; requireNoNetwork: boolean }
  | Denial<SandboxSpec>;

/**
 * The policy's evaluation of a Sandbox's spec alone, whatever the cluster: what the egress proxy
 * reads a session's allowlist from, so that it holds the session to exactly what the operator admitted.
 */
export function evaluateSandboxSpec(
  rawSpec: unknown,
  policy: Policy,
): Denial<SandboxSpec> | { allowed: true; spec: SandboxSpec; effective: EffectiveSessionSpec } {
  const parsed = SandboxSpecSchema.safeParse(rawSpec ?? {});
  if (!parsed.success) return denied(undefined, 'invalid spec', issuesToViolations(parsed.error.issues));
  const spec = parsed.data;
  const request = SessionRequestSchema.safeParse(toSessionRequestInput(spec));
  if (!request.success) return denied(spec, 'invalid spec', issuesToViolations(request.error.issues));
  const evaluation = evaluateSession(request.data, policy);
  if (!evaluation.ok) return denied(spec, 'denied by policy', evaluation.violations);
  return { allowed: true, spec, effective: evaluation.spec };
}

export function evaluateSandbox(rawSpec: unknown, policy: Policy, cluster: ClusterFacts): SandboxVerdict {
  const evaluated = evaluateSandboxSpec(rawSpec, policy);
  if (!evaluated.allowed) return evaluated;
  const { spec, effective } = evaluated;
  const egress = effective.network.egress === 'allowlist';
  const refusal = egress ? egressRefusal(cluster.egress) : undefined;
  if (refusal) return denied(spec, 'denied by policy', [refusal]);
  // An allowlisted session (admitted only where NetworkPolicy is enforced) has the pod's network,
  // cut down by its policy to the proxy.
  return { allowed: true, spec, effective, requireNoNetwork: !egress && !cluster.networkPolicyEnforced };
}
