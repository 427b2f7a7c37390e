// The chart's egress: off by default (nothing rendered, DISABLE_NETWORK kept); on, `sandpit
// egress-proxy` as a Deployment in the restricted profile with its Service, key Secret, its own
// NetworkPolicy and exactly the permissions src/egress/permissions.ts declares, and the operator's
// config pointing at it (loaded through the real config schema).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import type { Config } from '../../../src/config/schema.js';
import { EGRESS_PROXY_PERMISSIONS } from '../../../src/egress/permissions.js';
import { grantsFor, grantsOf, type RbacRule } from '../../support/rbac.js';
import { find, type K8sObject, render } from './helm.js';

const NS = 'sandpit-system';
const NAME = 'sandpit-egress-proxy';
const ON = {
  'egress.enabled': true,
  'egress.networkPolicyEnforced': true,
  'egress.allow': ['pypi.org', '*.pythonhosted.org', '10.1.0.0/16:5432'],
  'egress.internalCidrs': ['10.244.0.0/16', '10.96.0.0/12'],
};

interface Container {
  args: string[];
  securityContext: Record<string, unknown>;
  ports: { name: string; containerPort: number }[];
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
  resources: { requests: Record<string, string>; limits: Record<string, string> };
}
interface PodSpec {
  serviceAccountName: string;
  automountServiceAccountToken: boolean;
  securityContext: Record<string, unknown>;
  hostNetwork?: boolean;
  containers: Container[];
  volumes: { name: string; secret?: { secretName: string } }[];
}
const podOf = (docs: K8sObject[], name: string): PodSpec =>
  (find(docs, 'Deployment', name) as K8sObject & { spec: { template: { spec: PodSpec } } }).spec.template
    .spec;

function configOf(docs: K8sObject[], name: string): Config {
  const text = (find(docs, 'ConfigMap', name) as K8sObject & { data: Record<string, string> }).data[
    'config.yaml'
  ]!;
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-chart-egress-'));
  try {
    writeFileSync(path.join(dir, 'c.yaml'), text);
    return loadConfig({ configPath: path.join(dir, 'c.yaml'), env: {} });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('charts/sandpit: egress', { concurrency: true }, () => {
  test('off by default: no proxy objects, the network disabled, no egress in the operator config', async () => {
    const docs = await render({ namespace: NS });
    assert.ok(!docs.some((d) => d.metadata.name.includes('egress')));
    const op = configOf(docs, 'sandpit-operator');
    assert.equal(op.sandbox.disableNetwork, true);
    assert.equal(op.kubernetes.egress.enabled, false);
  });

  test('on: the proxy Deployment in the restricted profile, its key mounted read-only', async () => {
    const docs = await render({ namespace: NS, values: ON });
    const pod = podOf(docs, NAME);
    const c = pod.containers[0]!;
    assert.deepEqual(c.args, ['egress-proxy', '--config', '/etc/sandpit/config.yaml']);
    assert.deepEqual(pod.securityContext, {
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    assert.deepEqual(c.securityContext, {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    assert.equal(pod.hostNetwork, undefined);
    assert.equal(pod.serviceAccountName, 'sandpit-egress');
    assert.ok(c.resources.limits.cpu && c.resources.limits.memory);
    assert.deepEqual(
      c.ports.map((p) => [p.name, p.containerPort]),
      [
        ['proxy', 3128],
        ['probes', 8082],
      ],
    );
    assert.deepEqual(
      c.volumeMounts.find((m) => m.name === 'egress-key'),
      { name: 'egress-key', mountPath: '/etc/sandpit-egress', readOnly: true },
    );
    assert.equal(pod.volumes.find((v) => v.name === 'egress-key')?.secret?.secretName, 'sandpit-egress-key');
    const secret = find(docs, 'Secret', 'sandpit-egress-key') as K8sObject & { data: { key: string } };
    assert.ok(Buffer.from(secret.data.key, 'base64').length >= 32, 'a generated key');
    const op = podOf(docs, 'sandpit-operator');
    assert.equal(op.volumes.find((v) => v.name === 'egress-key')?.secret?.secretName, 'sandpit-egress-key');
  });

  test('on: the configs point at the proxy, with the ceiling, the internal ranges and the declaration', async () => {
    const docs = await render({ namespace: NS, values: ON });
    for (const name of ['sandpit-operator', NAME]) {
      const config = configOf(docs, name);
      assert.equal(config.sandbox.disableNetwork, false, name);
      assert.deepEqual(config.sandbox.egress.allow, ['pypi.org', '*.pythonhosted.org', '10.1.0.0/16:5432']);
      assert.deepEqual(config.sandbox.egress.internalCidrs, ['10.244.0.0/16', '10.96.0.0/12']);
      const e = config.kubernetes.egress;
      assert.deepEqual(
        [e.enabled, e.networkPolicyEnforced, e.service, e.namespace, e.port, e.keyFile],
        [true, true, NAME, NS, 3128, '/etc/sandpit-egress/key'],
      );
      assert.deepEqual(e.podLabels, {
        'app.kubernetes.io/name': 'sandpit',
        'app.kubernetes.io/instance': 'sandpit',
        'app.kubernetes.io/component': 'egress-proxy',
      });
    }
    const gw = configOf(docs, 'sandpit-gateway');
    assert.equal(gw.sandbox.disableNetwork, false, 'the gateway refuses what the operator would');
    const unenforced = configOf(
      await render({ namespace: NS, values: { 'egress.enabled': true } }),
      'sandpit-operator',
    );
    assert.equal(unenforced.kubernetes.egress.networkPolicyEnforced, false);
  });

  test("on: the Service selects the proxy's pods; their NetworkPolicy admits only sandpit's sandbox pods on the proxy port", async () => {
    const docs = await render({ namespace: NS, values: ON });
    const svc = find(docs, 'Service', NAME) as K8sObject & {
      spec: { selector: Record<string, string>; ports: { port: number; targetPort: string }[] };
    };
    assert.equal(svc.spec.selector['app.kubernetes.io/component'], 'egress-proxy');
    assert.deepEqual(svc.spec.ports[0], { name: 'proxy', port: 3128, targetPort: 'proxy', protocol: 'TCP' });
    const np = find(docs, 'NetworkPolicy', NAME) as K8sObject & {
      spec: { policyTypes: string[]; ingress: { ports: { port: number }[]; from?: unknown[] }[] };
    };
    assert.deepEqual(np.spec.policyTypes, ['Ingress']);
    assert.deepEqual(np.spec.ingress[0]!.ports, [{ port: 3128, protocol: 'TCP' }]);
    assert.deepEqual(np.spec.ingress[0]!.from, [
      {
        namespaceSelector: {},
        podSelector: { matchLabels: { 'sandpit.dev/managed-by': 'sandpit-operator' } },
      },
    ]);
  });

  test('on: its ClusterRole is exactly src/egress/permissions.ts, bound to its own ServiceAccount', async () => {
    const docs = await render({ namespace: NS, values: ON });
    const role = find(docs, 'ClusterRole', NAME) as K8sObject & { rules: RbacRule[] };
    assert.deepEqual(grantsOf(role.rules), grantsFor(EGRESS_PROXY_PERMISSIONS));
    const binding = find(docs, 'ClusterRoleBinding', NAME) as K8sObject & {
      subjects: { kind: string; name: string; namespace: string }[];
    };
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'sandpit-egress', namespace: NS }]);
  });
});
