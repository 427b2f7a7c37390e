/**
 * Every API permission `sandpit egress-proxy` uses, and the call that needs it: the chart's
 * ClusterRole for it grants exactly these (a unit test renders the chart and compares). It only
 * reads: which pod has a source address, and which run or session that pod serves with what
 * allowlist.
 */
export interface ProxyPermission {
  apiGroup: string;
  resource: string;
  verbs: readonly string[];
}

export const EGRESS_PROXY_PERMISSIONS: readonly ProxyPermission[] = [
  // informers: a connection's run or session, its allowlist evaluated as the operator does, and
  // whether it is live
  { apiGroup: 'sandpit.dev', resource: 'sandboxruns', verbs: ['list', 'watch'] },
  { apiGroup: 'sandpit.dev', resource: 'sandboxes', verbs: ['list', 'watch'] },
  // informer on the operator's pods (its managed-by label): which run's or session's pod has a source address
  { apiGroup: '', resource: 'pods', verbs: ['list', 'watch'] },
];
