/**
 * A sandbox's egress on Kubernetes, as the operator renders it (DESIGN.md §6): the pod keeps
 * `dnsPolicy: None` and no resolver; its NetworkPolicy allows egress only to the egress proxy's
 * pods on the proxy's port, plus the allowlist's CIDR entries as `ipBlock`s (one fixed deny-all
 * still selects every sandpit pod). The proxy variables point at the proxy's Service address (pods
 * resolve no names) with the sandbox's credential (src/egress/credential.ts). Pure.
 */
import { isCidrEntry, type EffectiveNetwork } from '../../api/egress.js';
import type { Violation } from '../../shared/errors.js';
import { egressCredential, proxyUser, type ProxyIdentity } from '../../egress/credential.js';
import type { Container, NetworkPolicyEgressRule, ObjectMeta, Secret } from '../../kube/objects.js';
import { EGRESS_LOCAL_PORT, EGRESS_PROXY_VARS, NO_PROXY_VALUE } from '../../runner/protocol.js';

/** How this cluster's sandboxes reach the egress proxy (config `kubernetes.egress`). */
export interface ClusterEgress {
  /** The proxy's Service: its cluster IP and port, which the proxy variables name. */
  service: { ip: string; port: number };
  /** The proxy's pods, as the NetworkPolicy names them: their namespace's labels, their labels, their port. */
  peer: { namespaceLabels: Record<string, string>; podLabels: Record<string, string>; port: number };
  /** The key of the sandboxes' proxy credentials, shared with the proxy. */
  key: Buffer;
  /**
   * Declared in the config (`egress.networkPolicyEnforced` in the chart): the cluster enforces the
   * sandboxes' NetworkPolicies. An allowlist is admitted only then.
   */
  networkPolicyEnforced: boolean;
}

/** The proxy's address, `ip:port` (`[ip]:port` for IPv6): what a pool pod carries before any run. */
export function proxyAddress(egress: ClusterEgress): string {
  const host = egress.service.ip.includes(':') ? `[${egress.service.ip}]` : egress.service.ip;
  return `${host}:${egress.service.port}`;
}

/** The variable with the proxy's address in a pool pod of an egress shape (no credential: no run yet). */
export const EGRESS_PROXY_ADDRESS_VAR = 'SANDPIT_EGRESS_PROXY';

/** The proxy URL of one sandbox, its credential in it. */
export function proxyUrl(egress: ClusterEgress, id: ProxyIdentity): string {
  return `http://${proxyUser(id)}:${egressCredential(egress.key, id)}@${proxyAddress(egress)}`;
}

/** HTTP(S)_PROXY (both spellings) and NO_PROXY for a sandbox. */
export function egressEnv(egress: ClusterEgress, id: ProxyIdentity): { name: string; value: string }[] {
  const url = proxyUrl(egress, id);
  return [
    ...EGRESS_PROXY_VARS.map((name) => ({ name, value: url })),
    { name: 'NO_PROXY', value: NO_PROXY_VALUE },
    { name: 'no_proxy', value: NO_PROXY_VALUE },
  ];
}

/**
 * The NetworkPolicy egress rules of a sandbox: with an allowlist, the proxy and each CIDR entry;
 * without one, or without the proxy, none (deny-all).
 */
export function egressRules(
  network: EffectiveNetwork,
  egress: ClusterEgress | undefined,
): NetworkPolicyEgressRule[] {
  if (network.egress === 'none' || !egress) return [];
  return [
    {
      to: [
        {
          namespaceSelector: { matchLabels: { ...egress.peer.namespaceLabels } },
          podSelector: { matchLabels: { ...egress.peer.podLabels } },
        },
      ],
      ports: [{ protocol: 'TCP', port: egress.peer.port }],
    },
    ...network.allow.filter(isCidrEntry).map((e) => ({
      to: [{ ipBlock: { cidr: e.cidr } }],
      ...(e.ports ? { ports: e.ports.map((port) => ({ protocol: 'TCP', port })) } : {}),
    })),
  ];
}

/**
 * Why this cluster cannot give a sandbox an allowlist, if it cannot: without the proxy there is no
 * way out; without NetworkPolicy enforcement the pod would have the node's whole network.
 */
export function egressRefusal(egress: ClusterEgress | undefined): Violation | undefined {
  const refusal = (message: string): Violation => ({
    field: 'network.egress',
    message,
    limit: 'none',
    requested: 'allowlist',
  });
  if (!egress)
    return refusal(
      "this cluster runs no egress proxy (egress.enabled in the chart's values, kubernetes.egress.enabled)",
    );
  if (!egress.networkPolicyEnforced)
    return refusal(
      "an egress allowlist needs a cluster that enforces NetworkPolicy, and this one is not declared to (egress.networkPolicyEnforced in the chart's values, kubernetes.egress.networkPolicyEnforced): an allowlisted pod would have the node's whole network",
    );
  return undefined;
}

/** The key of the Secret that holds a sandbox's proxy URL (its credential in it). */
export const PROXY_URL_KEY = 'proxy-url';

/** The Secret that holds a sandbox's proxy URL. */
export function buildEgressSecret(meta: ObjectMeta, egress: ClusterEgress, id: ProxyIdentity): Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta,
    type: 'Opaque',
    immutable: true,
    data: { [PROXY_URL_KEY]: Buffer.from(proxyUrl(egress, id)).toString('base64') },
  };
}

/**
 * A sandbox's own Secret when it has an allowlist (and the cluster the proxy): its proxy URL,
 * credential included (no ConfigMap holds it). Its meta is the sandbox pod's: same name.
 */
export function egressSecretOf(
  meta: ObjectMeta,
  network: EffectiveNetwork,
  egress: { cluster: ClusterEgress | undefined; id: ProxyIdentity },
): Secret | undefined {
  if (network.egress === 'none' || !egress.cluster) return undefined;
  return buildEgressSecret(meta, egress.cluster, egress.id);
}

/** The proxy variables of a pod whose sandbox has an allowlist, taken from its Secret (none without). */
export function egressPodEnv(network: EffectiveNetwork, secretName: string): NonNullable<Container['env']> {
  if (network.egress === 'none') return [];
  return [
    ...EGRESS_PROXY_VARS.map((name) => ({
      name,
      valueFrom: { secretKeyRef: { name: secretName, key: PROXY_URL_KEY } },
    })),
    { name: 'NO_PROXY', value: NO_PROXY_VALUE },
    { name: 'no_proxy', value: NO_PROXY_VALUE },
  ];
}

/** Where the proxy listens in its pods by default (the same port the runner forwards on Docker). */
export const DEFAULT_PROXY_PORT = EGRESS_LOCAL_PORT;
