// The chart's tenants: each tenant namespace gets the gateway's Role (exactly the verbs the code
// declares) bound to the gateway's ServiceAccount, a ResourceQuota on the Sandbox and SandboxRun
// counts when a quota is set, its Namespace when asked, and the operator's watch.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { GATEWAY_PERMISSIONS } from '../../../src/backends/kubernetes/permissions.js';
import { loadConfig } from '../../../src/config/load.js';
import { grantsFor, grantsOf, type RbacRule } from '../../support/rbac.js';
import { CHART, helm, render, type K8sObject } from './helm.js';

const NS = 'sandpit-system';
const TENANTS = [
  { name: 'team-a', quota: { sandboxRuns: 2 } },
  { name: 'team-b', quota: { sandboxes: 0, sandboxRuns: null }, labels: { team: 'b' } },
  { name: 'team-c' },
];

type Role = K8sObject & { rules: RbacRule[] };
type Binding = K8sObject & {
  roleRef: { kind: string; name: string };
  subjects: { kind: string; name: string; namespace?: string }[];
};
type Quota = K8sObject & { spec: { hard: Record<string, string> } };

const of = <T extends K8sObject>(docs: K8sObject[], kind: string): T[] =>
  docs.filter((d) => d.kind === kind) as T[];
const byNamespace = <T extends K8sObject>(docs: T[]): Record<string, T> =>
  Object.fromEntries(docs.map((d) => [d.metadata.namespace ?? d.metadata.name, d]));

function operatorNamespaces(docs: K8sObject[]): string[] {
  const cm = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'sandpit-operator') as
    (K8sObject & { data: Record<string, string> }) | undefined;
  assert.ok(cm);
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-chart-tenants-'));
  try {
    const file = path.join(dir, 'config.yaml');
    writeFileSync(file, cm.data['config.yaml']!);
    return loadConfig({ configPath: file, env: {} }).kubernetes.operator.namespaces;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('charts/sandpit tenants', { concurrency: true }, () => {
  test("the gateway's Role, exactly the declared verbs, bound in its own and every tenant's namespace", async () => {
    const docs = await render({ namespace: NS, values: { 'tenants.namespaces': TENANTS } });
    const roles = byNamespace(of<Role>(docs, 'Role').filter((r) => r.metadata.name === 'sandpit-gateway'));
    assert.deepEqual(Object.keys(roles).sort(), [NS, 'team-a', 'team-b', 'team-c']);
    const wanted = grantsFor(GATEWAY_PERMISSIONS.filter((p) => p.scope === 'run-namespace'));
    for (const role of Object.values(roles)) assert.deepEqual(grantsOf(role.rules), wanted);
    const bindings = byNamespace(
      of<Binding>(docs, 'RoleBinding').filter((b) => b.metadata.name === 'sandpit-gateway'),
    );
    assert.deepEqual(Object.keys(bindings).sort(), Object.keys(roles).sort());
    for (const b of Object.values(bindings)) {
      assert.deepEqual(b.roleRef, {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'Role',
        name: 'sandpit-gateway',
      });
      assert.deepEqual(b.subjects, [{ kind: 'ServiceAccount', name: 'sandpit-gateway', namespace: NS }]);
    }
    assert.equal(of(docs, 'Namespace').length, 0, 'namespaces are not created unless asked');
  });

  test('quotas: a tenant’s own wins key by key (0 and null too) over tenants.quota; none without a cap', async () => {
    const docs = await render({
      namespace: NS,
      values: { 'tenants.namespaces': TENANTS, 'tenants.quota': { sandboxes: 3, sandboxRuns: 10 } },
    });
    const quotas = byNamespace(of<Quota>(docs, 'ResourceQuota'));
    assert.deepEqual(quotas['team-a']?.spec.hard, {
      'count/sandboxes.sandpit.dev': '3',
      'count/sandboxruns.sandpit.dev': '2',
    });
    assert.deepEqual(quotas['team-b']?.spec.hard, { 'count/sandboxes.sandpit.dev': '0' });
    assert.deepEqual(quotas['team-c']?.spec.hard, {
      'count/sandboxes.sandpit.dev': '3',
      'count/sandboxruns.sandpit.dev': '10',
    });
    for (const q of Object.values(quotas)) assert.equal(q.metadata.name, 'sandpit-tenant');
    const none = await render({ namespace: NS, values: { 'tenants.namespaces': [{ name: 'team-c' }] } });
    assert.equal(of(none, 'ResourceQuota').length, 0);
  });

  test('createNamespaces: a Namespace per tenant with the chart labels and its own', async () => {
    const docs = await render({
      namespace: NS,
      values: { 'tenants.namespaces': TENANTS, 'tenants.createNamespaces': true },
    });
    const namespaces = byNamespace(of(docs, 'Namespace'));
    assert.deepEqual(Object.keys(namespaces).sort(), ['team-a', 'team-b', 'team-c']);
    assert.equal(namespaces['team-b']?.metadata.labels?.team, 'b');
    assert.equal(namespaces['team-a']?.metadata.labels?.['app.kubernetes.io/part-of'], 'sandpit');
  });

  test('the operator watches the tenants when it watches a list; all namespaces stays all', async () => {
    const listed = await render({
      namespace: NS,
      values: { 'tenants.namespaces': TENANTS, 'operator.watchNamespaces': [NS] },
    });
    assert.deepEqual(operatorNamespaces(listed), [NS, 'team-a', 'team-b', 'team-c']);
    const all = await render({ namespace: NS, values: { 'tenants.namespaces': TENANTS } });
    assert.deepEqual(operatorNamespaces(all), []);
  });

  test('refused with a reason: a tenant twice, a bad name, a token mapped to a namespace with no Role', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['--set-json', 'tenants.namespaces=[{"name":"a"},{"name":"a"}]'],
        /tenants\.namespaces: "a" is listed twice/,
      ],
      [['--set-json', 'tenants.namespaces=[{"name":"Team_A"}]'], /\/tenants\/namespaces\/0\/name'/],
      [['--set-json', 'tenants.quota={"sandboxes":-1}'], /\/tenants\/quota\/sandboxes'/],
      [
        [
          '--set-json',
          'gateway.extraConfig={"auth":{"tokens":[{"name":"a","token":"aaaaaaaaaa","namespace":"team-z"}]}}',
        ],
        /token "a" maps to namespace "team-z", which is not in tenants\.namespaces/,
      ],
    ];
    for (const [flags, want] of cases) {
      const res = await helm(['template', 'sandpit', CHART, '--namespace', NS, ...flags]);
      assert.notEqual(res.code, 0, flags.join(' '));
      assert.match(res.stderr, want);
    }
    const ok = await helm([
      'template',
      'sandpit',
      CHART,
      '--namespace',
      NS,
      '--set-json',
      'tenants.namespaces=[{"name":"team-z"}]',
      '--set-json',
      'gateway.extraConfig={"auth":{"tokens":[{"name":"a","token":"aaaaaaaaaa","namespace":"team-z"}]}}',
    ]);
    assert.equal(ok.code, 0, ok.stderr);
  });
});
