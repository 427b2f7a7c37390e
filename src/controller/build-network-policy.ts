/**
 * buildNetworkPolicy(): deny all ingress and all egress for exactly this run's pod (selected by
 * the run's UID label). Egress rules do not exist yet, so there is no allowlist to render. Pure.
 */
import type { NetworkPolicy, NetworkPolicySpec } from '../kube/objects.js';
import { LABEL_RUN_UID } from '../api/v1alpha1/labels.js';
import { childMeta, type RunRef } from './children.js';

export function buildNetworkPolicy(run: RunRef): NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: childMeta(run),
    spec: {
      podSelector: { matchLabels: { [LABEL_RUN_UID]: run.uid } },
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
