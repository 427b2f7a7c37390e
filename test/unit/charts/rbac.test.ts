// The chart's RBAC is exactly what the code uses: the operator's ClusterRole and Lease Role equal
// src/controller/permissions.ts, the gateway's Roles equal src/backends/kubernetes/permissions.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GATEWAY_PERMISSIONS } from '../../../src/backends/kubernetes/permissions.js';
import { OPERATOR_PERMISSIONS } from '../../../src/controller/permissions.js';
import { find, type K8sObject, render } from './helm.js';
import { grantsFor, grantsOf, type RbacRule } from '../../support/rbac.js';

type Role = K8sObject & { rules: RbacRule[] };
type Binding = K8sObject & {
  roleRef: { apiGroup: string; kind: string; name: string };
  subjects: { kind: string; name: string; namespace?: string }[];
};

describe('chart RBAC = the permissions the code declares', () => {
  test('operator: the ClusterRole (cluster-wide) and the leader-election Role (release namespace)', async () => {
    const docs = await render({ namespace: 'sandpit-system' });
    const cluster = find(docs, 'ClusterRole', 'sandpit-operator') as Role;
    assert.deepEqual(
      grantsOf(cluster.rules),
      grantsFor(OPERATOR_PERMISSIONS.filter((p) => p.scope === 'cluster')),
    );
    const crb = find(docs, 'ClusterRoleBinding', 'sandpit-operator') as Binding;
    assert.deepEqual(crb.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'sandpit-operator',
    });
    assert.deepEqual(crb.subjects, [
      { kind: 'ServiceAccount', name: 'sandpit-operator', namespace: 'sandpit-system' },
    ]);

    const lease = find(docs, 'Role', 'sandpit-operator-leader-election') as Role;
    assert.equal(lease.metadata.namespace, 'sandpit-system');
    assert.deepEqual(
      grantsOf(lease.rules),
      grantsFor(OPERATOR_PERMISSIONS.filter((p) => p.scope === 'lease-namespace')),
    );
    const rb = find(docs, 'RoleBinding', 'sandpit-operator-leader-election') as Binding;
    assert.equal(rb.metadata.namespace, 'sandpit-system');
    assert.deepEqual(rb.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: lease.metadata.name,
    });
    assert.deepEqual(rb.subjects, crb.subjects);
  });

  test('gateway: the run-namespace Role and the operator-health Role, bound per namespace only', async () => {
    const docs = await render({ namespace: 'sandpit-system', values: { 'gateway.runNamespace': 'agents' } });
    const run = find(docs, 'Role', 'sandpit-gateway') as Role;
    assert.equal(run.metadata.namespace, 'agents');
    assert.deepEqual(
      grantsOf(run.rules),
      grantsFor(GATEWAY_PERMISSIONS.filter((p) => p.scope === 'run-namespace')),
    );
    const health = find(docs, 'Role', 'sandpit-gateway-operator-health') as Role;
    assert.equal(health.metadata.namespace, 'sandpit-system');
    assert.deepEqual(
      grantsOf(health.rules),
      grantsFor(GATEWAY_PERMISSIONS.filter((p) => p.scope === 'lease-namespace')),
    );
    for (const role of [run, health]) {
      const rb = find(docs, 'RoleBinding', role.metadata.name) as Binding;
      assert.equal(rb.metadata.namespace, role.metadata.namespace);
      assert.deepEqual(rb.roleRef, {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'Role',
        name: role.metadata.name,
      });
      assert.deepEqual(rb.subjects, [
        { kind: 'ServiceAccount', name: 'sandpit-gateway', namespace: 'sandpit-system' },
      ]);
    }
    assert.ok(
      !docs.some(
        (d) =>
          d.kind === 'ClusterRoleBinding' && d.metadata.labels?.['app.kubernetes.io/component'] === 'gateway',
      ),
      'nothing of the gateway is bound cluster-wide',
    );
  });

  test('no wildcards, no escalation verbs, no resourceNames or URLs anywhere', async () => {
    const docs = await render();
    for (const d of docs.filter((x) => x.kind === 'ClusterRole' || x.kind === 'Role') as Role[]) {
      for (const r of d.rules) {
        for (const x of [...r.apiGroups, ...r.resources, ...r.verbs])
          assert.notEqual(x, '*', d.metadata.name);
        for (const v of r.verbs)
          assert.ok(!['escalate', 'bind', 'impersonate'].includes(v), `${d.metadata.name}: ${v}`);
        assert.equal(r.nonResourceURLs, undefined);
      }
    }
  });
});
