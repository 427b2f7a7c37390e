import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { grantsFor, grantsOf, type RbacRule } from '../../support/rbac.js';
import { OPERATOR_PERMISSIONS } from '../../../src/controller/permissions.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

interface Doc {
  kind: string;
  metadata: { name: string };
  rules?: RbacRule[];
}

const docs = parseAllDocuments(readFileSync(path.join(ROOT, 'deploy/rbac.yaml'), 'utf8')).map(
  (d) => d.toJS() as Doc,
);

describe('deploy/rbac.yaml grants exactly the verbs the operator uses', () => {
  test('the cluster role', () => {
    const role = docs.find((d) => d.kind === 'ClusterRole' && d.metadata.name === 'sandpit-operator');
    assert.deepEqual(
      grantsOf(role?.rules ?? []),
      grantsFor(OPERATOR_PERMISSIONS.filter((p) => p.scope === 'cluster')),
    );
  });

  test('the leader election role (bound in the lease namespace only)', () => {
    const role = docs.find(
      (d) => d.kind === 'ClusterRole' && d.metadata.name === 'sandpit-operator-leader-election',
    );
    assert.deepEqual(
      grantsOf(role?.rules ?? []),
      grantsFor(OPERATOR_PERMISSIONS.filter((p) => p.scope === 'lease-namespace')),
    );
    assert.ok(
      docs.some((d) => d.kind === 'RoleBinding' && d.metadata.name === 'sandpit-operator-leader-election'),
    );
    assert.ok(
      !docs.some(
        (d) => d.kind === 'ClusterRoleBinding' && d.metadata.name === 'sandpit-operator-leader-election',
      ),
    );
  });

  test('no wildcards, no escalation verbs', () => {
    for (const d of docs) {
      for (const r of d.rules ?? []) {
        for (const x of [...r.apiGroups, ...r.resources, ...r.verbs]) assert.notEqual(x, '*');
        for (const v of r.verbs) assert.ok(!['escalate', 'bind', 'impersonate'].includes(v));
      }
    }
  });
});
