/**
 * buildNetworkPolicy(): deny all ingress and all egress for exactly the pods `podSelector` picks
 * (one sandbox's, by its owner's UID label). Egress rules do not exist yet, so there is no
 * allowlist to render. Pure.
 */
import type { NetworkPolicy, NetworkPolicySpec, ObjectMeta } from '../../kube/objects.js';

export function buildNetworkPolicy(meta: ObjectMeta, podSelector: Record<string, string>): NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta,
    spec: {
      podSelector: { matchLabels: podSelector },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    },
  };
}

/** Same rules as `want`? (The apiserver drops empty lists, so missing and [] compare equal.) */
export function sameNetworkPolicySpec(have: NetworkPolicySpec | undefined, want: NetworkPolicySpec): boolean {
  const norm = (s: NetworkPolicySpec | undefined) =>
    JSON.stringify({
      podSelector: s?.podSelector ?? {},
      policyTypes: [...(s?.policyTypes ?? [])].sort(),
      ingress: s?.ingress ?? [],
      egress: s?.egress ?? [],
    });
  return norm(have) === norm(want);
}
