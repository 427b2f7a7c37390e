/**
 * buildSessionChildren(): what one admitted Sandbox wants made, as a run's children are (pure):
 * its NetworkPolicy (deny-all; with an egress allowlist, egress to the proxy's pods and the CIDR
 * entries only), its own Secret with its proxy URL and credential when it has an allowlist, and
 * its pod, whose env takes the proxy variables from that Secret.
 */
import type { ClusterEgress } from '../pod/egress.js';
import { egressRules, egressSecretOf } from '../pod/egress.js';
import { buildNetworkPolicy } from '../pod/build-network-policy.js';
import type { PodSettings } from '../pod/build-sandbox-pod.js';
import type { WantedChildren } from '../pod/ensure-children.js';
import type { ObjectRef } from '../children.js';
import { buildSessionPod } from './build-session-pod.js';
import type { SandboxVerdict } from './evaluate-sandbox.js';
import { sessionChildMeta, sessionPodSelector } from './sandbox-ref.js';

export interface SessionChildrenSettings {
  pod: PodSettings;
  /** The policy's TTL ceiling: the pod's backstop (build-session-pod.ts). */
  maxTtlSeconds: number;
  /** The egress proxy, when the cluster runs one (an allowlist is admitted only then). */
  egress?: ClusterEgress | undefined;
}

export function buildSessionChildren(
  sandbox: ObjectRef,
  verdict: Extract<SandboxVerdict, { allowed: true }>,
  settings: SessionChildrenSettings,
): Omit<WantedChildren, 'claim'> {
  const meta = sessionChildMeta(sandbox);
  const { network } = verdict.effective;
  return {
    networkPolicy: buildNetworkPolicy(
      meta,
      sessionPodSelector(sandbox),
      egressRules(network, settings.egress),
    ),
    secret: egressSecretOf(meta, network, {
      cluster: settings.egress,
      id: { kind: 'sandbox', uid: sandbox.uid },
    }),
    pod: buildSessionPod(sandbox, verdict.effective, settings.pod, {
      requireNoNetwork: verdict.requireNoNetwork,
      maxTtlSeconds: settings.maxTtlSeconds,
    }),
    runtimeClass: verdict.effective.runtime,
  };
}
