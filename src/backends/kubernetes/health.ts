/**
 * The Kubernetes backend's health: the apiserver answers, the SandboxRun API is installed, an
 * operator holds its Lease (renewed within its duration), and the gateway's identity has every
 * permission in permissions.ts in every namespace it makes runs in (its own and each tenant's;
 * asked with SelfSubjectAccessReviews). Each failed check says how to fix it.
 */
import { SANDBOX_RUN } from '../../api/v1alpha1/sandboxrun.js';
import type { Lease } from '../../kube/objects.js';
import { isAppError } from '../../shared/errors.js';
import type { BackendHealth } from '../types.js';
import { CRD_HINT, rbacHint, unreachableHint } from './errors.js';
import { describePermission, GATEWAY_PERMISSIONS } from './permissions.js';
import type { RunApi } from './run-api.js';
import { BACKEND_NAME, INTERLEAVED_NOTE } from './run-result.js';

export interface HealthTarget {
  /** Where runs are created: the backend's namespace first, then the tenants'. */
  namespaces: readonly string[];
  /** The operator's Lease; undefined when leader election is off (the check is skipped). */
  lease: { namespace: string; name: string } | undefined;
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Whether the Lease has a holder that renewed it within its duration. Pure. */
export function leaseHeld(lease: Lease | undefined, now: number): { held: boolean; detail: string } {
  const spec = lease?.spec;
  if (!lease || !spec?.holderIdentity) return { held: false, detail: 'nobody holds the operator Lease' };
  const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : NaN;
  const duration = (spec.leaseDurationSeconds ?? 15) * 1000;
  if (!Number.isFinite(renewed))
    return { held: false, detail: `Lease holder ${spec.holderIdentity} never renewed it` };
  const age = Math.max(0, now - renewed);
  if (age > duration) {
    return {
      held: false,
      detail: `Lease holder ${spec.holderIdentity} last renewed it ${Math.round(age / 1000)} s ago (duration ${duration / 1000} s)`,
    };
  }
  return {
    held: true,
    detail: `operator ${spec.holderIdentity} leads (renewed ${Math.round(age / 1000)} s ago)`,
  };
}

async function missingPermissions(
  api: RunApi,
  target: HealthTarget,
): Promise<{ namespace: string; what: string }[]> {
  const checks = GATEWAY_PERMISSIONS.flatMap((p) => {
    const namespaces = p.scope === 'lease-namespace' ? [target.lease?.namespace] : target.namespaces;
    return namespaces.flatMap((namespace) =>
      namespace === undefined
        ? []
        : p.verbs.map(async (verb) =>
            (await api.canI({ namespace, verb, group: p.apiGroup, resource: p.resource }))
              ? undefined
              : { namespace, what: `${describePermission(p, verb)} in ${namespace}` },
          ),
    );
  });
  return (await Promise.all(checks)).filter((m) => m !== undefined);
}

export async function checkHealth(
  api: RunApi,
  target: HealthTarget,
  now = Date.now(),
): Promise<BackendHealth> {
  const fail = (detail: string): BackendHealth => ({ ok: false, backend: BACKEND_NAME, detail });
  let version: string;
  try {
    version = await api.version();
  } catch (e) {
    return fail(`${message(e)}; ${isAppError(e) && e.hint ? e.hint : unreachableHint(api.server)}`);
  }
  const problems: string[] = [];
  const facts: string[] = [`API server ${api.server} (${version})`];
  try {
    const resources = await api.runApiResources();
    if (resources.includes(SANDBOX_RUN.plural)) facts.push('SandboxRun API installed');
    else problems.push(`the SandboxRun API is not installed: ${CRD_HINT}`);
  } catch (e) {
    problems.push(`discovery failed: ${message(e)}`);
  }
  if (target.lease) {
    try {
      const { held, detail } = leaseHeld(await api.getLease(target.lease), now);
      if (held) facts.push(detail);
      else
        problems.push(
          `${detail} (${target.lease.namespace}/${target.lease.name}): start the operator (deploy/README.md)`,
        );
    } catch (e) {
      problems.push(`cannot read the operator Lease: ${message(e)}`);
    }
  }
  try {
    const missing = await missingPermissions(api, target);
    const lacking = [...new Set(missing.map((m) => m.namespace))];
    if (missing.length)
      problems.push(
        `the gateway lacks ${missing.map((m) => m.what).join(', ')}: ${lacking
          .map((namespace) => rbacHint({ resource: SANDBOX_RUN.plural, namespace }))
          .join('; ')}`,
      );
  } catch (e) {
    problems.push(`cannot check the gateway's permissions: ${message(e)}`);
  }
  const [own, ...tenants] = target.namespaces;
  const where = `runs in namespace ${own}${tenants.length ? `, tenants' in ${tenants.join(', ')}` : ''}`;
  return problems.length
    ? fail([...problems, ...facts, where].join('; '))
    : { ok: true, backend: BACKEND_NAME, detail: [...facts, where, INTERLEAVED_NOTE].join('; ') };
}
