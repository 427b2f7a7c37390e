/**
 * buildNetworkPolicy(): for exactly the pods `podSelector` picks (one sandbox's, by its owner's UID
 * label), no ingress at all and no egress but `egress`: none for a sandbox without egress (deny-all),
 * the egress proxy and the allowlist's CIDR entries for one with an allowlist (pod/egress.ts). Pure.
 */
import type {
  NetworkPolicy,
  NetworkPolicyEgressRule,
  NetworkPolicySpec,
  ObjectMeta,
} from '../../kube/objects.js';

export function buildNetworkPolicy(
  meta: ObjectMeta,
  podSelector: Record<string, string>,
  egress: NetworkPolicyEgressRule[] = [],
): NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta,
    spec: {
      podSelector: { matchLabels: podSelector },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress,
    },
  };
}

/** Same rules as `want`? (The apiserver drops empty lists, so missing and [] compare equal.) */
/** JSON with every object's keys sorted: the API server writes a rule's fields in its own order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

export function sameNetworkPolicySpec(have: NetworkPolicySpec | undefined, want: NetworkPolicySpec): boolean {
  const norm = (s: NetworkPolicySpec | undefined) =>
    canonical({
      podSelector: s?.podSelector ?? {},
      policyTypes: [...(s?.policyTypes ?? [])].sort(),
      ingress: s?.ingress ?? [],
      egress: s?.egress ?? [],
    });
  return norm(have) === norm(want);
}
