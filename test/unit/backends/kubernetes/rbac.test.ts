import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import {
  GATEWAY_LEASE_ROLE,
  GATEWAY_PERMISSIONS,
  GATEWAY_ROLE,
} from '../../../../src/backends/kubernetes/permissions.js';
import { grantsFor, grantsOf, type RbacRule } from '../../../support/rbac.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

interface Doc {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: RbacRule[];
  roleRef?: { kind: string; name: string };
}

const docs = parseAllDocuments(readFileSync(path.join(ROOT, 'deploy/gateway-rbac.yaml'), 'utf8')).map(
  (d) => d.toJS() as Doc,
);
const wanted = (scope: 'run-namespace' | 'lease-namespace'): string[] =>
  grantsFor(GATEWAY_PERMISSIONS.filter((p) => p.scope === scope));
const role = (name: string): Doc | undefined =>
  docs.find((d) => d.kind === 'ClusterRole' && d.metadata.name === name);

describe('deploy/gateway-rbac.yaml grants exactly the verbs the gateway uses', () => {
  test('the run-namespace role', () => {
    assert.deepEqual(grantsOf(role(GATEWAY_ROLE)?.rules ?? []), wanted('run-namespace'));
  });

  test('the operator-health role (the Lease)', () => {
    assert.deepEqual(grantsOf(role(GATEWAY_LEASE_ROLE)?.rules ?? []), wanted('lease-namespace'));
  });

  test('both are bound per namespace (RoleBindings), never cluster-wide', () => {
    for (const name of [GATEWAY_ROLE, GATEWAY_LEASE_ROLE]) {
      const bindings = docs.filter((d) => d.roleRef?.name === name);
      assert.ok(bindings.length > 0, `${name} is bound`);
      for (const b of bindings) {
        assert.equal(b.kind, 'RoleBinding');
        assert.ok(b.metadata.namespace);
      }
    }
    assert.ok(!docs.some((d) => d.kind === 'ClusterRoleBinding'));
  });

  test('the gateway never creates or deletes pods, and has no wildcard or escalation verb', () => {
    for (const d of docs) {
      for (const r of d.rules ?? []) {
        for (const x of [...r.apiGroups, ...r.resources, ...r.verbs]) assert.notEqual(x, '*');
        for (const v of r.verbs) assert.ok(!['escalate', 'bind', 'impersonate'].includes(v));
        if (r.resources.includes('pods')) assert.deepEqual(r.verbs.sort(), ['get', 'watch']);
        if (r.resources.includes('sandboxruns')) assert.ok(!r.verbs.includes('delete'));
      }
    }
  });
});
