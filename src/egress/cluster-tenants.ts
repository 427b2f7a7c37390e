/**
 * Whose a connection to `sandpit egress-proxy` is, on Kubernetes: the credential in its
 * Proxy-Authorization (credential.ts) names a SandboxRun or a Sandbox by UID and proves it, and the
 * source address must be the pod that run or session holds now. So a credential read off one pod
 * is worth nothing from another, and a pod with no credential (a pool pod not yet claimed) gets
 * nothing. The allowlist is the operator's own evaluation of the run's or session's spec. Pure over the lookups it is given (the
 * composition root feeds them from informers).
 */
import type { IncomingMessage } from 'node:http';
import type { EffectiveNetwork } from '../api/egress.js';
import { parseIp, formatIp, unmapIp } from '../shared/ip.js';
import { proxyUser, verifyProxyAuthorization, type ProxyIdentity } from './credential.js';
import type { TenantLookup, TenantOf } from './proxy.js';
import { createTenant, type EgressTenant } from './tenant.js';

/** A sandbox as the proxy sees it: who owns it, and its evaluated network. */
export interface ClusterSandbox {
  /** `namespace/name` of the SandboxRun or Sandbox, for the audit record. */
  name: string;
  principal: string;
  network: EffectiveNetwork;
}

export interface ClusterLookups {
  /** The sandbox whose pod has this address now (a Running pod the sandbox controls). */
  ownerAt(address: string): ProxyIdentity | undefined;
  /** The live sandbox with this identity, or undefined (gone, finished, or not admitted). */
  sandbox(id: ProxyIdentity): ClusterSandbox | undefined;
}

export interface ClusterTenants {
  tenantOf: TenantOf;
  /** Forgets the usage of sandboxes that are gone (called now and then). */
  sweep(): void;
  readonly size: number;
}

const unauthorized = (rule: string): TenantLookup => ({
  refused: { status: 407, reason: 'unauthorized', rule },
});
const noEgress = (rule: string): TenantLookup => ({ refused: { status: 403, reason: 'no-egress', rule } });

/** The remote address as the pod's IP is written (an IPv4-mapped address as IPv4). */
export function sourceAddress(remote: string | undefined): string | undefined {
  const ip = remote === undefined ? undefined : parseIp(remote);
  return ip && formatIp(unmapIp(ip));
}

export function createClusterTenants(key: Buffer, lookups: ClusterLookups): ClusterTenants {
  // Usage counts per sandbox, across its connections (the limits are per run or session, not per connection).
  const tenants = new Map<string, EgressTenant>();

  const tenantOf = (req: IncomingMessage): TenantLookup => {
    const id = verifyProxyAuthorization(key, req.headers['proxy-authorization']);
    if (!id) return unauthorized('no valid sandbox credential (Proxy-Authorization)');
    const source = sourceAddress(req.socket.remoteAddress);
    const owner = source === undefined ? undefined : lookups.ownerAt(source);
    if (!owner || owner.kind !== id.kind || owner.uid !== id.uid) {
      return unauthorized(`the credential of ${proxyUser(id)} is not this pod's (${source ?? 'unknown'})`);
    }
    const sandbox = lookups.sandbox(id);
    if (!sandbox) return noEgress(`${proxyUser(id)} is gone or has no egress`);
    if (sandbox.network.egress !== 'allowlist') return noEgress(`${sandbox.name} has no egress allowlist`);
    const user = proxyUser(id);
    let tenant = tenants.get(user);
    if (!tenant) {
      const subject = id.kind === 'run' ? { runId: sandbox.name } : { sessionId: sandbox.name };
      tenant = createTenant(subject, sandbox.principal, sandbox.network);
      tenants.set(user, tenant);
    }
    return { tenant };
  };

  return {
    tenantOf,
    sweep() {
      for (const user of tenants.keys()) {
        const dash = user.indexOf('-');
        const kind = user.slice(0, dash) as ProxyIdentity['kind'];
        const tenant = tenants.get(user)!;
        if (tenant.usage.open === 0 && !lookups.sandbox({ kind, uid: user.slice(dash + 1) }))
          tenants.delete(user);
      }
    },
    get size() {
      return tenants.size;
    },
  };
}
