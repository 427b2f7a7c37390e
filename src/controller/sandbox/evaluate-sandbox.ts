/**
 * evaluateSandbox(): the authoritative policy verdict on a Sandbox (DESIGN.md §3): its spec is
 * read as the shared session request and given to the same evaluateSession() the gateway uses, so
 * a Sandbox made with kubectl gets exactly the limits one made through sandpit gets. Egress none
 * fails closed as a run's does: unless the cluster is declared to enforce the session's deny-all
 * NetworkPolicy, the session runner refuses a sandbox with any interface but lo before it starts.
 * Pure.
 */
import { SessionRequestSchema } from '../../api/session.js';
import { issuesToViolations } from '../../api/validate.js';
import { SandboxSpecSchema, toSessionRequestInput, type SandboxSpec } from '../../api/v1alpha1/sandbox.js';
import type { Policy } from '../../policy/policy.js';
import { evaluateSession, type EffectiveSessionSpec } from '../../policy/session.js';
import type { ClusterFacts } from '../sandboxrun/evaluate-run.js';
import { denied, type Denial } from '../verdict.js';

export type SandboxVerdict =
  | { allowed: true; spec: SandboxSpec; effective: EffectiveSessionSpec; requireNoNetwork: boolean }
  | Denial<SandboxSpec>;

export function evaluateSandbox(rawSpec: unknown, policy: Policy, cluster: ClusterFacts): SandboxVerdict {
  const parsed = SandboxSpecSchema.safeParse(rawSpec ?? {});
  if (!parsed.success) return denied(undefined, 'invalid spec', issuesToViolations(parsed.error.issues));
  const spec = parsed.data;
  const request = SessionRequestSchema.safeParse(toSessionRequestInput(spec));
  if (!request.success) return denied(spec, 'invalid spec', issuesToViolations(request.error.issues));
  const evaluation = evaluateSession(request.data, policy);
  if (!evaluation.ok) return denied(spec, 'denied by policy', evaluation.violations);
  if (evaluation.spec.network.egress === 'allowlist') {
    // The session's runner gets its proxy variables from neither a job nor the gateway yet.
    return denied(spec, 'denied by policy', [
      {
        field: 'network.egress',
        message:
          'an egress allowlist is not available for sessions on Kubernetes yet (runs have it; on Docker sessions do too)',
        limit: 'none',
        requested: 'allowlist',
      },
    ]);
  }
  return {
    allowed: true,
    spec,
    effective: evaluation.spec,
    requireNoNetwork: !cluster.networkPolicyEnforced,
  };
}
