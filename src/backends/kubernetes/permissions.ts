/**
 * Every API permission the gateway's Kubernetes backend uses, and the call that needs it.
 * deploy/gateway-rbac.yaml grants exactly these (a unit test compares them), and the contract
 * tests run the backend with that role, never as admin, so a missing verb fails for real.
 * Discovery (`/apis/sandpit.dev/v1alpha1`), `/version` and SelfSubjectAccessReviews need no grant:
 * every authenticated user has them (system:discovery, system:basic-user).
 */
export interface GatewayPermission {
  apiGroup: string;
  /** A resource, or resource/subresource (`pods/log`). */
  resource: string;
  verbs: readonly string[];
  /**
   * Where the permission is bound: each namespace runs are created in (the gateway's own and every
   * tenant's, auth.tokens[].namespace), or the operator's Lease namespace.
   */
  scope: 'run-namespace' | 'lease-namespace';
  /** The call that needs it, for error hints and health reports. */
  why: string;
}

export const GATEWAY_PERMISSIONS: readonly GatewayPermission[] = [
  {
    apiGroup: 'sandpit.dev',
    resource: 'sandboxruns',
    verbs: ['create', 'get', 'list', 'patch', 'watch'],
    scope: 'run-namespace',
    why: 'create a run, follow its status (watch; get after an expired watch), cancel it (patch spec.cancel); get_run and cancel_run of a run another replica follows (get, patch, watch); tasks/list of the tasks any replica made (list, by label)',
  },
  {
    apiGroup: 'sandpit.dev',
    resource: 'sandboxes',
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'watch'],
    scope: 'run-namespace',
    why: 'create a session, wait for it to be ready (watch), find it by name or after a restart (get, list), extend its lifetime (patch spec.ttlSeconds), delete it',
  },
  {
    apiGroup: 'coordination.k8s.io',
    resource: 'leases',
    verbs: ['create', 'get', 'update'],
    scope: 'run-namespace',
    why: "hold a session's Lease (who is attached to its pod) and write its activity (renewTime)",
  },
  {
    apiGroup: '',
    resource: 'pods',
    verbs: ['get', 'watch'],
    scope: 'run-namespace',
    why: "wait until a cancelled run's pod is gone; check a session pod's owner before attaching",
  },
  {
    apiGroup: '',
    resource: 'pods/attach',
    // A WebSocket attach is a GET (v1.20 authorizes `get`); clusters from v1.31 also ask for `create`.
    verbs: ['create', 'get'],
    scope: 'run-namespace',
    why: "talk to a session pod's runner on its attached stdin and stdout",
  },
  {
    apiGroup: '',
    resource: 'pods/log',
    verbs: ['get'],
    scope: 'run-namespace',
    why: "follow the run's output live",
  },
  {
    apiGroup: '',
    resource: 'configmaps',
    verbs: ['get'],
    scope: 'run-namespace',
    why: 'read the files a run returned (outputs), kept in a ConfigMap the run owns',
  },
  {
    apiGroup: 'coordination.k8s.io',
    resource: 'leases',
    verbs: ['get'],
    scope: 'lease-namespace',
    why: 'health: see that an operator holds its Lease',
  },
];

/** `create sandboxruns.sandpit.dev`, `get pods/log`: how kubectl and RBAC messages name a permission. */
export function describePermission(
  p: Pick<GatewayPermission, 'apiGroup' | 'resource'>,
  verb: string,
): string {
  return `${verb} ${p.resource}${p.apiGroup ? `.${p.apiGroup}` : ''}`;
}

/** The RBAC objects that grant the permissions (deploy/gateway-rbac.yaml). */
export const GATEWAY_ROLE = 'sandpit-gateway';
export const GATEWAY_LEASE_ROLE = 'sandpit-gateway-operator-health';
