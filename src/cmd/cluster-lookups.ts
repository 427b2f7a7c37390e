/**
 * The lookups of `sandpit egress-proxy` (src/egress/cluster-tenants.ts), over its caches of
 * sandpit's pods, SandboxRuns and Sandboxes: which live run or session has the pod at a source
 * address, and the allowlist the operator's own evaluation of its spec gives it.
 */
import type { EffectiveNetwork } from '../api/egress.js';
import { isTerminal, type Phase } from '../api/run.js';
import { isSessionEnded, type SessionState } from '../api/session.js';
import { ANNOTATION_PRINCIPAL, LABEL_RUN_UID, LABEL_SESSION_UID } from '../api/v1alpha1/labels.js';
import { evaluateSandboxSpec } from '../controller/sandbox/evaluate-sandbox.js';
import { evaluateRunSpec } from '../controller/sandboxrun/evaluate-run.js';
import type { ClusterLookups, ClusterSandbox } from '../egress/cluster-tenants.js';
import type { KubeObject, Pod } from '../kube/objects.js';
import type { Policy } from '../policy/policy.js';

export interface RunObject extends KubeObject {
  spec?: unknown;
  status?: { phase?: Phase };
}

export interface SandboxObject extends KubeObject {
  spec?: unknown;
  status?: { phase?: SessionState };
}

export interface ClusterCaches {
  pods: { list(): Pod[] };
  runs: { list(): RunObject[] };
  sandboxes: { list(): SandboxObject[] };
}

/** The live object with this UID, as the proxy sees it, when the policy admits its spec. */
function liveSandbox(
  object: (KubeObject & { spec?: unknown }) | undefined,
  network: (spec: unknown) => EffectiveNetwork | undefined,
): ClusterSandbox | undefined {
  const evaluated = object && network(object.spec);
  if (!object || !evaluated) return undefined;
  return {
    name: `${object.metadata?.namespace}/${object.metadata?.name}`,
    principal: object.metadata?.annotations?.[ANNOTATION_PRINCIPAL] ?? 'kubectl',
    network: evaluated,
  };
}

export function clusterLookups(caches: ClusterCaches, policy: Policy): ClusterLookups {
  const runNetwork = (spec: unknown): EffectiveNetwork | undefined => {
    const r = evaluateRunSpec(spec, policy);
    return r.allowed ? r.effective.network : undefined;
  };
  const sessionNetwork = (spec: unknown): EffectiveNetwork | undefined => {
    const r = evaluateSandboxSpec(spec, policy);
    return r.allowed ? r.effective.network : undefined;
  };
  return {
    ownerAt(address) {
      const pod = caches.pods
        .list()
        .find(
          (p) =>
            p.status?.phase === 'Running' && p.status.podIP === address && !p.metadata?.deletionTimestamp,
        );
      const labels = pod?.metadata?.labels ?? {};
      const run = labels[LABEL_RUN_UID];
      if (run) return { kind: 'run', uid: run };
      const session = labels[LABEL_SESSION_UID];
      return session ? { kind: 'sandbox', uid: session } : undefined;
    },
    sandbox(id) {
      if (id.kind === 'run') {
        const run = caches.runs.list().find((r) => r.metadata?.uid === id.uid);
        const ended = run?.status?.phase !== undefined && isTerminal(run.status.phase);
        return ended ? undefined : liveSandbox(run, runNetwork);
      }
      const sandbox = caches.sandboxes.list().find((s) => s.metadata?.uid === id.uid);
      const ended = sandbox?.status?.phase !== undefined && isSessionEnded(sandbox.status.phase);
      return ended ? undefined : liveSandbox(sandbox, sessionNetwork);
    },
  };
}
