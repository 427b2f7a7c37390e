/**
 * Every API permission the operator uses, and the call that needs it. deploy/rbac.yaml grants
 * exactly these (a unit test compares them), and the integration tests run the operator with that
 * role, so a missing verb fails for real and an extra one fails the comparison.
 */
export interface Permission {
  apiGroup: string;
  resource: string;
  verbs: readonly string[];
  /**
   * Lease permissions (and the egress proxy's Service) are namespaced: a Role in the lease's
   * namespace, the release namespace; the rest cluster-wide.
   */
  scope: 'cluster' | 'lease-namespace';
}

export const OPERATOR_PERMISSIONS: readonly Permission[] = [
  // informer (list, watch); TTL clean-up (delete)
  { apiGroup: 'sandpit.dev', resource: 'sandboxruns', verbs: ['delete', 'list', 'watch'], scope: 'cluster' },
  // the one status write per pass (PUT …/status)
  { apiGroup: 'sandpit.dev', resource: 'sandboxruns/status', verbs: ['update'], scope: 'cluster' },
  // informer (list, watch); TTL clean-up (delete)
  { apiGroup: 'sandpit.dev', resource: 'sandboxes', verbs: ['delete', 'list', 'watch'], scope: 'cluster' },
  // the one status write per pass (PUT …/status)
  { apiGroup: 'sandpit.dev', resource: 'sandboxes/status', verbs: ['update'], scope: 'cluster' },
  // informer (list, watch)
  { apiGroup: 'sandpit.dev', resource: 'sandboxpools', verbs: ['list', 'watch'], scope: 'cluster' },
  // the one status write per pass (PUT …/status)
  { apiGroup: 'sandpit.dev', resource: 'sandboxpools/status', verbs: ['update'], scope: 'cluster' },
  // informer; create; cancel and clean-up; a live read when the cache has not seen a recorded pod;
  // the claim of a pool pod (one resourceVersion-guarded update)
  {
    apiGroup: '',
    resource: 'pods',
    verbs: ['create', 'delete', 'get', 'list', 'update', 'watch'],
    scope: 'cluster',
  },
  // a claimed pool pod's job and result (only a pod a SandboxRun owns); a WebSocket attach is a
  // GET (v1.20 authorizes `get`); clusters from v1.31 also ask for `create`
  { apiGroup: '', resource: 'pods/attach', verbs: ['create', 'get'], scope: 'cluster' },
  // the output tail
  { apiGroup: '', resource: 'pods/log', verbs: ['get'], scope: 'cluster' },
  // informer; the job; a run's output files (get: the one a pass made before a conflict)
  { apiGroup: '', resource: 'configmaps', verbs: ['create', 'get', 'list', 'watch'], scope: 'cluster' },
  // a run or session with an egress allowlist: its own Secret (its proxy URL, credential in it); a
  // live read of one that exists already, to check that its owner controls it (creating pods in a
  // namespace lets one read its Secrets anyway)
  { apiGroup: '', resource: 'secrets', verbs: ['create', 'get'], scope: 'cluster' },
  // Events on SandboxRuns and Sandboxes; the kubelet's Events on a pod whose sandbox it cannot create
  { apiGroup: '', resource: 'events', verbs: ['create', 'list'], scope: 'cluster' },
  // informer; deny-all; restoring a changed policy; reading the namespace's deny-all when it exists
  // but the informer does not show it (its labels were changed)
  {
    apiGroup: 'networking.k8s.io',
    resource: 'networkpolicies',
    verbs: ['create', 'get', 'list', 'update', 'watch'],
    scope: 'cluster',
  },
  // informer: runs naming a missing RuntimeClass wait instead of making a pod that cannot start
  { apiGroup: 'node.k8s.io', resource: 'runtimeclasses', verbs: ['list', 'watch'], scope: 'cluster' },
  // informer on session Leases (the gateway writes them; their renewTime is the last activity)
  { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['list', 'watch'], scope: 'cluster' },
  // the egress proxy's Service in the release namespace (its cluster IP goes into sandboxes' proxy
  // variables, since sandbox pods resolve no names)
  { apiGroup: '', resource: 'services', verbs: ['get'], scope: 'lease-namespace' },
  // leader election
  {
    apiGroup: 'coordination.k8s.io',
    resource: 'leases',
    verbs: ['create', 'get', 'update'],
    scope: 'lease-namespace',
  },
];
