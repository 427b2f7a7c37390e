// The chart's values in the shapes well-liked charts use (ingress, serviceAccount, security
// contexts, extra env and volumes, spread, pull secrets), the gateway's stateless mode past one
// replica, NOTES.txt, and the optional ValidatingAdmissionPolicy, whose CEL runs here with a CEL
// library (the v1.20 test cluster has no CEL).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { evaluate } from '@marcbachmann/cel-js';
import { loadConfig } from '../../../src/config/load.js';
import type { Config } from '../../../src/config/schema.js';
import { imageAllowed } from '../../../src/policy/images.js';
import { CHART, find, helm, type K8sObject, render } from './helm.js';

type Pod = {
  serviceAccountName: string;
  imagePullSecrets?: { name: string }[];
  securityContext?: Record<string, unknown>;
  priorityClassName?: string;
  topologySpreadConstraints?: unknown[];
  volumes: { name: string }[];
  containers: {
    env?: { name: string; value?: string }[];
    securityContext?: Record<string, unknown>;
    volumeMounts: { name: string; mountPath: string }[];
    readinessProbe?: { httpGet?: { httpHeaders?: { name: string; value: string }[] } };
  }[];
};
const podOf = (docs: K8sObject[], name: string): Pod =>
  (find(docs, 'Deployment', name) as K8sObject & { spec: { template: { spec: Pod } } }).spec.template.spec;

function gatewayConfig(docs: K8sObject[], name = 'sandpit-gateway'): Config {
  const text = (find(docs, 'ConfigMap', name) as K8sObject & { data: Record<string, string> }).data[
    'config.yaml'
  ]!;
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-chart-conventions-'));
  try {
    writeFileSync(path.join(dir, 'c.yaml'), text);
    return loadConfig({ configPath: path.join(dir, 'c.yaml'), env: { SANDPIT_AUTH_TOKEN: 'x'.repeat(16) } });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const COMPONENTS = ['operator', 'gateway'] as const;

describe('the gateway past one replica', () => {
  test('replicas > 1 renders server.stateless: true; one replica stays stateful unless asked', async () => {
    assert.equal(gatewayConfig(await render()).server.stateless, false);
    assert.equal(gatewayConfig(await render({ values: { 'gateway.replicas': 3 } })).server.stateless, true);
    assert.equal(
      gatewayConfig(await render({ values: { 'gateway.stateless': true } })).server.stateless,
      true,
    );
  });
});

describe('ingress', () => {
  test('off by default; on: an Ingress to the gateway Service, its hosts accepted as Host headers', async () => {
    assert.equal((await render()).filter((d) => d.kind === 'Ingress').length, 0);
    const docs = await render({
      values: {
        'gateway.ingress': {
          enabled: true,
          className: 'nginx',
          annotations: { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600' },
          hosts: [{ host: 'sandpit.example.com', paths: [{ path: '/', pathType: 'Prefix' }] }],
          tls: [{ secretName: 'sandpit-tls', hosts: ['sandpit.example.com'] }],
        },
      },
    });
    const ing = find(docs, 'Ingress', 'sandpit-gateway') as K8sObject & {
      spec: {
        ingressClassName: string;
        tls: unknown[];
        rules: { host: string; http: { paths: { path: string; backend: { service: unknown } }[] } }[];
      };
    };
    assert.equal(ing.apiVersion, 'networking.k8s.io/v1');
    assert.equal(ing.spec.ingressClassName, 'nginx');
    assert.deepEqual(ing.metadata.annotations, { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600' });
    assert.deepEqual(ing.spec.tls, [{ secretName: 'sandpit-tls', hosts: ['sandpit.example.com'] }]);
    assert.equal(ing.spec.rules[0]!.host, 'sandpit.example.com');
    assert.deepEqual(ing.spec.rules[0]!.http.paths[0]!.backend.service, {
      name: 'sandpit-gateway',
      port: { name: 'http' },
    });
    assert.deepEqual(gatewayConfig(docs).server.allowedHosts, ['sandpit.example.com', 'localhost']);
    const probe = podOf(docs, 'sandpit-gateway').containers[0]!.readinessProbe?.httpGet?.httpHeaders;
    assert.deepEqual(probe, [{ name: 'Host', value: 'localhost' }]);
  });
});

describe('service accounts', () => {
  test('created by default under the component names, with annotations for workload identity', async () => {
    const docs = await render({
      values: {
        'operator.serviceAccount.annotations': {
          'iam.gke.io/gcp-service-account': 'op@p.iam.gserviceaccount.com',
        },
        'gateway.serviceAccount.annotations': { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/gw' },
      },
    });
    for (const c of COMPONENTS) {
      const sa = find(docs, 'ServiceAccount', `sandpit-${c}`);
      assert.ok(sa.metadata.annotations && Object.keys(sa.metadata.annotations).length === 1, c);
      assert.equal(podOf(docs, `sandpit-${c}`).serviceAccountName, `sandpit-${c}`);
    }
  });

  test('create: false uses the named account everywhere (pods and bindings) and renders none', async () => {
    const docs = await render({
      values: {
        'operator.serviceAccount': { create: false, name: 'platform-operator' },
        'gateway.serviceAccount': { create: false, name: 'platform-gateway' },
      },
    });
    assert.equal(docs.filter((d) => d.kind === 'ServiceAccount').length, 0);
    for (const c of COMPONENTS) {
      assert.equal(podOf(docs, `sandpit-${c}`).serviceAccountName, `platform-${c}`);
      const bindings = docs.filter(
        (d) => d.kind.endsWith('Binding') && d.metadata.name.startsWith(`sandpit-${c}`),
      ) as (K8sObject & { subjects: { name: string }[] })[];
      assert.ok(bindings.length > 0);
      for (const b of bindings)
        assert.deepEqual(
          b.subjects.map((s) => s.name),
          [`platform-${c}`],
          b.metadata.name,
        );
    }
  });
});

describe('pod settings', () => {
  test('defaults: the restricted profile on pods and containers', async () => {
    const docs = await render();
    for (const c of COMPONENTS) {
      const pod = podOf(docs, `sandpit-${c}`);
      assert.deepEqual(pod.securityContext, {
        runAsNonRoot: true,
        runAsUser: 1000,
        runAsGroup: 1000,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      assert.deepEqual(pod.containers[0]!.securityContext, {
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
      });
    }
  });

  test('OpenShift: runAsUser and runAsGroup null leave the UID to the platform; container context overridable', async () => {
    const docs = await render({
      values: {
        'podSecurityContext.runAsUser': null,
        'podSecurityContext.runAsGroup': null,
        'securityContext.seLinuxOptions': { level: 's0:c123,c456' },
      },
    });
    for (const c of COMPONENTS) {
      const pod = podOf(docs, `sandpit-${c}`);
      assert.deepEqual(pod.securityContext, {
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      assert.deepEqual(pod.containers[0]!.securityContext?.seLinuxOptions, { level: 's0:c123,c456' });
      assert.equal(pod.containers[0]!.securityContext?.readOnlyRootFilesystem, true);
    }
  });

  test('imagePullSecrets, extraEnv, extraVolumes/extraVolumeMounts, topologySpreadConstraints, priorityClassName', async () => {
    const spread = [
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' },
    ];
    const values: Record<string, unknown> = { imagePullSecrets: [{ name: 'regcred' }] };
    for (const c of COMPONENTS) {
      values[`${c}.extraEnv`] = [{ name: 'HTTPS_PROXY', value: 'http://proxy:3128' }];
      values[`${c}.extraVolumes`] = [{ name: 'ca', configMap: { name: 'corp-ca' } }];
      values[`${c}.extraVolumeMounts`] = [{ name: 'ca', mountPath: '/etc/ssl/corp', readOnly: true }];
      values[`${c}.topologySpreadConstraints`] = spread;
      values[`${c}.priorityClassName`] = 'system-cluster-critical';
    }
    const docs = await render({ values });
    for (const c of COMPONENTS) {
      const pod = podOf(docs, `sandpit-${c}`);
      const container = pod.containers[0]!;
      assert.deepEqual(pod.imagePullSecrets, [{ name: 'regcred' }], c);
      assert.deepEqual(
        container.env?.find((e) => e.name === 'HTTPS_PROXY'),
        {
          name: 'HTTPS_PROXY',
          value: 'http://proxy:3128',
        },
      );
      assert.ok(pod.volumes.some((v) => v.name === 'ca'));
      assert.ok(
        pod.volumes.some((v) => v.name === 'tmp'),
        'the chart’s own volumes stay',
      );
      assert.ok(container.volumeMounts.some((m) => m.mountPath === '/etc/ssl/corp'));
      assert.deepEqual(pod.topologySpreadConstraints, spread);
      assert.equal(pod.priorityClassName, 'system-cluster-critical');
    }
    // The gateway keeps its token variable beside the extra ones.
    assert.ok(
      podOf(docs, 'sandpit-gateway').containers[0]!.env?.some((e) => e.name === 'SANDPIT_AUTH_TOKEN'),
    );
  });

  test('helm lint --strict passes with every new value set', async () => {
    const res = await helm([
      'lint',
      '--strict',
      CHART,
      '--kube-version',
      '1.31.0',
      '--set-json',
      'gateway.ingress={"enabled":true,"hosts":[{"host":"a.example"}]}',
      '--set-json',
      'operator.serviceAccount={"create":false,"name":"x"}',
      '--set-json',
      'imagePullSecrets=[{"name":"r"}]',
      '--set',
      'admissionPolicy.enabled=true,gateway.replicas=2',
    ]);
    assert.equal(res.code, 0, res.stdout + res.stderr);
  });
});

describe('NOTES.txt', () => {
  test('prints a sample SandboxRun inline, and no repository path', async () => {
    const res = await helm([
      'install',
      'sandpit',
      CHART,
      '--dry-run=client',
      '--namespace',
      'sandpit-system',
    ]);
    assert.equal(res.code, 0, res.stderr);
    const notes = res.stdout.slice(res.stdout.indexOf('NOTES:'));
    assert.match(notes, /kind: SandboxRun\n/);
    assert.match(notes, /kubectl wait .*--for=condition=Finished/);
    assert.doesNotMatch(notes, /deploy\/|samples\/|charts\//, 'a chart user has no repository');
  });
});

interface Policy extends K8sObject {
  spec: {
    matchConstraints: { resourceRules: { operations: string[]; resources: string[] }[] };
    variables: { name: string; expression: string }[];
    validations: { expression: string; message: string }[];
  };
}

async function admissionPolicy(values: Record<string, unknown> = {}) {
  const docs = await render({
    values: { 'admissionPolicy.enabled': true, ...values },
    flags: ['--kube-version', '1.31.0'],
  });
  const policy = docs.find((d) => d.kind === 'ValidatingAdmissionPolicy') as Policy;
  const binding = docs.find((d) => d.kind === 'ValidatingAdmissionPolicyBinding') as K8sObject & {
    spec: { policyName: string; validationActions: string[]; matchResources?: unknown };
  };
  /** The messages of the validations `spec` fails, evaluated as the apiserver would: variables first. */
  const refusals = (spec: Record<string, unknown>): string[] => {
    const object = { apiVersion: 'sandpit.dev/v1alpha1', kind: 'SandboxRun', metadata: { name: 'r' }, spec };
    const variables: Record<string, unknown> = {};
    for (const v of policy.spec.variables) variables[v.name] = evaluate(v.expression, { object, variables });
    return policy.spec.validations
      .filter((v) => evaluate(v.expression, { object, variables }) !== true)
      .map((v) => v.message);
  };
  return { policy, binding, refusals };
}

describe('the ValidatingAdmissionPolicy (optional, Kubernetes 1.30+)', () => {
  test('off by default; on, it refuses clusters older than 1.30 with a message', async () => {
    assert.equal((await render()).filter((d) => d.kind.startsWith('ValidatingAdmissionPolicy')).length, 0);
    const res = await helm([
      'template',
      'sandpit',
      CHART,
      '--set',
      'admissionPolicy.enabled=true',
      '--kube-version',
      '1.29.0',
    ]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /admissionPolicy\.enabled needs Kubernetes 1\.30 or later/);
  });

  test('matches SandboxRun creation, denies, and binds to the watched namespaces', async () => {
    const { policy, binding } = await admissionPolicy({
      'operator.watchNamespaces': ['agents'],
      'gateway.runNamespace': 'agents',
    });
    assert.equal(policy.apiVersion, 'admissionregistration.k8s.io/v1');
    assert.deepEqual(policy.spec.matchConstraints.resourceRules[0]!.resources, ['sandboxruns']);
    assert.deepEqual(policy.spec.matchConstraints.resourceRules[0]!.operations, ['CREATE']);
    assert.equal(binding.spec.policyName, policy.metadata.name);
    assert.deepEqual(binding.spec.validationActions, ['Deny']);
    assert.deepEqual(binding.spec.matchResources, {
      namespaceSelector: {
        matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['agents'] }],
      },
    });
  });

  test('its CEL refuses no code and no command, a timeout over the ceiling, an image outside the allowlist', async () => {
    const { refusals } = await admissionPolicy({
      'sandbox.timeoutSeconds': 120,
      'sandbox.imageAllowlist': ['sandpit/*', 'python:3.11'],
    });
    assert.deepEqual(refusals({ template: 'python', code: 'print(1)' }), []);
    assert.deepEqual(refusals({ image: 'sandpit/bash:5', command: ['true'], timeoutSeconds: 120 }), []);
    assert.deepEqual(refusals({ template: 'python' }), [
      'spec.code or spec.command must be given, and not empty',
    ]);
    assert.deepEqual(refusals({ template: 'python', code: '' }), [
      'spec.code or spec.command must be given, and not empty',
    ]);
    assert.deepEqual(refusals({ template: 'bash', command: [] }), [
      'spec.code or spec.command must be given, and not empty',
    ]);
    assert.deepEqual(refusals({ template: 'python', code: 'x', timeoutSeconds: 121 }), [
      'spec.timeoutSeconds is over the ceiling of 120s (sandbox.timeoutSeconds)',
    ]);
    assert.deepEqual(refusals({ image: 'evil/miner:1', command: ['x'] }), [
      'spec.image is not in the image allowlist (sandbox.imageAllowlist: sandpit/*, python:3.11)',
    ]);
  });

  test('never stricter than the operator: every image the operator allows passes', async () => {
    const allowlist = ['sandpit/*', 'python:3.11', 'registry.local:5000/team/tool:latest', 'node'];
    const { refusals } = await admissionPolicy({ 'sandbox.imageAllowlist': allowlist });
    const images = [
      'sandpit/python:3.11',
      'docker.io/sandpit/bash:5',
      'python:3.11',
      'docker.io/library/python:3.11',
      'library/python:3.11',
      'python:3.12',
      'registry.local:5000/team/tool',
      'registry.local:5000/team/tool:latest',
      'registry.local:5000/team/tool:v2',
      'node',
      'node:latest',
      'docker.io/library/node',
      'evil/python:3.11',
      'sandpitx/python:3.11',
    ];
    for (const image of images) {
      const vap = refusals({ image, command: ['true'] }).length === 0;
      if (imageAllowed(image, allowlist))
        assert.ok(vap, `${image}: the operator allows it, so must the policy`);
    }
    assert.equal(refusals({ image: 'evil/python:3.11', command: ['true'] }).length, 1);
    assert.equal(refusals({ image: 'sandpitx/python:3.11', command: ['true'] }).length, 1);
  });

  test('an empty allowlist (the operator’s defaults) renders no image check', async () => {
    const { policy } = await admissionPolicy({ 'sandbox.imageAllowlist': [] });
    assert.equal(policy.spec.validations.length, 2);
  });
});
