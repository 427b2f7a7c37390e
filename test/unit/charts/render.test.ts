// charts/sandpit rendered by the real helm (offline): lint, the objects and their hardening, the
// config files the pods read (loaded through the real config schema), and the value switches.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import type { Config } from '../../../src/config/schema.js';
import { generatedSeccompFiles } from '../../../src/policy/seccomp.js';
import { CHART, find, helm, type K8sObject, render, ROOT } from './helm.js';

const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;
const NS = 'sandpit-system';

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    runAsNonRoot?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    privileged?: boolean;
  };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface Probe {
  httpGet?: { path: string; port: string; host?: string; httpHeaders?: { name: string; value: string }[] };
  tcpSocket?: { port: string; host?: string };
}
interface PodSpec {
  serviceAccountName: string;
  automountServiceAccountToken?: boolean;
  enableServiceLinks?: boolean;
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    runAsGroup?: number;
    seccompProfile?: { type: string };
  };
  containers: Container[];
  volumes?: ({ name: string } & Record<string, unknown>)[];
}
interface Deployment extends K8sObject {
  spec: {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}

const deployment = (docs: K8sObject[], name: string): Deployment =>
  find(docs, 'Deployment', name) as Deployment;
const podOf = (docs: K8sObject[], name: string): PodSpec => deployment(docs, name).spec.template.spec;
const containerOf = (docs: K8sObject[], name: string): Container => podOf(docs, name).containers[0]!;
const configText = (docs: K8sObject[], name: string): string =>
  (find(docs, 'ConfigMap', name) as K8sObject & { data: Record<string, string> }).data['config.yaml']!;

/** The config a pod gets: its ConfigMap's file and its environment, through the real loader. */
function loadPodConfig(docs: K8sObject[], name: string, env: Record<string, string> = {}): Config {
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-chart-config-'));
  try {
    const file = path.join(dir, 'config.yaml');
    writeFileSync(file, configText(docs, name));
    return loadConfig({ configPath: file, env });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// API versions a v1.20 API server serves. Newer ones only behind .Capabilities checks.
const SERVED_BY_1_20 = new Set([
  'v1',
  'apps/v1',
  'rbac.authorization.k8s.io/v1',
  'networking.k8s.io/v1',
  'policy/v1beta1',
]);

describe('charts/sandpit renders', { concurrency: true }, () => {
  test('helm lint --strict passes, with default and with non-default values', async () => {
    const lint = await helm(['lint', '--strict', CHART]);
    assert.equal(lint.code, 0, lint.stdout + lint.stderr);
    const custom = await helm([
      'lint',
      '--strict',
      CHART,
      '--namespace',
      'agents',
      '--set-json',
      'operator.watchNamespaces=["agents","team-b"]',
      '--set',
      'gateway.auth.token=a-long-enough-token,gateway.service.type=NodePort,hostNetwork=true,apiServer.host=127.0.0.1',
    ]);
    assert.equal(custom.code, 0, custom.stdout + custom.stderr);
  });

  test('defaults: the operator, the gateway, RBAC, Services, NetworkPolicies, a PDB; no ServiceMonitor', async () => {
    const docs = await render();
    const names = docs.map((d) => `${d.kind}/${d.metadata.name}`).sort();
    assert.deepEqual(names, [
      'ClusterRole/sandpit-operator',
      'ClusterRoleBinding/sandpit-operator',
      'ConfigMap/sandpit-gateway',
      'ConfigMap/sandpit-operator',
      'ConfigMap/sandpit-seccomp',
      'DaemonSet/sandpit-seccomp',
      'Deployment/sandpit-gateway',
      'Deployment/sandpit-operator',
      'NetworkPolicy/sandpit-gateway',
      'NetworkPolicy/sandpit-operator',
      'PodDisruptionBudget/sandpit-operator',
      'Role/sandpit-gateway',
      'Role/sandpit-gateway-operator-health',
      'Role/sandpit-operator-leader-election',
      'RoleBinding/sandpit-gateway',
      'RoleBinding/sandpit-gateway-operator-health',
      'RoleBinding/sandpit-operator-leader-election',
      'Secret/sandpit-gateway',
      'Service/sandpit-gateway',
      'Service/sandpit-operator-metrics',
      'ServiceAccount/sandpit-gateway',
      'ServiceAccount/sandpit-operator',
    ]);
    for (const d of docs) {
      if (!['ClusterRole', 'ClusterRoleBinding'].includes(d.kind))
        assert.equal(d.metadata.namespace, NS, d.kind);
      assert.equal(d.metadata.labels?.['app.kubernetes.io/part-of'], 'sandpit');
      assert.equal(d.metadata.labels?.['app.kubernetes.io/instance'], 'sandpit');
      // policy/v1 PDBs only where served (the default capability set of `helm template` has it)
      if (d.kind !== 'PodDisruptionBudget') assert.ok(SERVED_BY_1_20.has(d.apiVersion), d.apiVersion);
    }
    assert.equal(find(docs, 'PodDisruptionBudget', 'sandpit-operator').apiVersion, 'policy/v1');
    const op = deployment(docs, 'sandpit-operator');
    assert.equal(op.spec.replicas, 2);
    assert.deepEqual(containerOf(docs, 'sandpit-operator').args, [
      'operator',
      '--config',
      '/etc/sandpit/config.yaml',
    ]);
    assert.equal(deployment(docs, 'sandpit-gateway').spec.replicas, 1);
    assert.deepEqual(containerOf(docs, 'sandpit-gateway').args, [
      'serve',
      '--config',
      '/etc/sandpit/config.yaml',
    ]);
    const pdb = find(docs, 'PodDisruptionBudget', 'sandpit-operator') as K8sObject & {
      spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } };
    };
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector.matchLabels, op.spec.selector.matchLabels);
  });

  test('every pod: the restricted profile, read-only root, the image of this version, resources, a token only for the API', async () => {
    const docs = await render();
    for (const name of ['sandpit-operator', 'sandpit-gateway']) {
      const d = deployment(docs, name);
      const pod = d.spec.template.spec;
      for (const [k, v] of Object.entries(d.spec.selector.matchLabels))
        assert.equal(d.spec.template.metadata.labels[k], v, `${name}: selector label ${k}`);
      assert.deepEqual(pod.securityContext, {
        runAsNonRoot: true,
        runAsUser: 1000,
        runAsGroup: 1000,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      assert.equal(pod.hostNetwork, undefined);
      assert.equal(pod.hostPID, undefined);
      assert.equal(pod.hostIPC, undefined);
      assert.equal(pod.enableServiceLinks, false);
      // Both talk to the API server: the pod mounts its token; the ServiceAccount does not by default.
      assert.equal(pod.automountServiceAccountToken, true);
      const sa = find(docs, 'ServiceAccount', pod.serviceAccountName) as K8sObject & {
        automountServiceAccountToken?: boolean;
      };
      assert.equal(sa.automountServiceAccountToken, false);
      for (const v of pod.volumes ?? []) {
        const kinds = Object.keys(v).filter((k) => k !== 'name');
        assert.ok(kinds.length === 1 && ['configMap', 'emptyDir'].includes(kinds[0]!), JSON.stringify(v));
      }
      assert.equal(pod.containers.length, 1);
      const c = pod.containers[0]!;
      assert.equal(c.image, `sandpit/sandpit:${VERSION}`);
      assert.deepEqual(c.securityContext, {
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
      });
      for (const k of ['cpu', 'memory']) {
        assert.ok(c.resources?.requests?.[k], `${name}: requests.${k}`);
        assert.ok(c.resources?.limits?.[k], `${name}: limits.${k}`);
      }
      assert.ok(
        c.volumeMounts?.some((m) => m.mountPath === '/tmp'),
        `${name}: a writable /tmp`,
      );
      assert.ok(c.readinessProbe && c.livenessProbe, `${name}: probes`);
    }
  });

  test('the config files load through the real schema and carry the values', async () => {
    const docs = await render();
    const op = loadPodConfig(docs, 'sandpit-operator');
    assert.deepEqual(op.kubernetes.operator.namespaces, []);
    assert.equal(op.kubernetes.operator.leaderElection, true);
    assert.equal(op.kubernetes.operator.leaseName, 'sandpit-operator');
    assert.equal(op.kubernetes.operator.leaseNamespace, NS);
    assert.equal(op.kubernetes.operator.probeHost, '0.0.0.0');
    assert.equal(op.kubernetes.operator.probePort, 8081);
    assert.equal(op.kubernetes.pendingTimeoutSeconds, 120);
    assert.equal(op.kubernetes.operator.ttlSecondsAfterFinished, 86400);
    assert.equal(op.kubernetes.runtimeClassName, undefined);
    assert.equal(op.sandbox.maxCpu, 1000);
    assert.equal(op.sandbox.maxMemory, 512 * 1024 ** 2);
    assert.deepEqual(op.sandbox.imageAllowlist, ['sandpit/*']);

    const container = containerOf(docs, 'sandpit-gateway');
    const tokenEnv = container.env?.find((e) => e.name === 'SANDPIT_AUTH_TOKEN');
    assert.deepEqual(tokenEnv?.valueFrom?.secretKeyRef, { name: 'sandpit-gateway', key: 'token' });
    const secret = find(docs, 'Secret', 'sandpit-gateway') as K8sObject & { data: { token: string } };
    const token = Buffer.from(secret.data.token, 'base64').toString('utf8');
    assert.match(token, /^[A-Za-z0-9]{40}$/, 'a generated token');
    const gw = loadPodConfig(docs, 'sandpit-gateway', { SANDPIT_AUTH_TOKEN: token });
    assert.equal(gw.sandbox.backend, 'kubernetes');
    assert.equal(gw.auth.token, token);
    assert.equal(gw.server.host, '0.0.0.0');
    assert.equal(gw.server.port, 8080);
    assert.equal(gw.kubernetes.gateway.namespace, NS);
    assert.equal(gw.kubernetes.operator.leaseNamespace, NS);
    assert.equal(gw.kubernetes.operator.leaseName, op.kubernetes.operator.leaseName);
    assert.equal(gw.kubernetes.gateway.ttlSecondsAfterFinished, 600);
    assert.equal(gw.kubernetes.gateway.pickupTimeoutSeconds, 30);
    // A read-only root: the gateway's audit trail is its log, not a file it could not write.
    assert.equal(gw.audit.enabled, false);
    assert.equal(op.audit.file, undefined, 'the operator writes no audit file either');
    // The same policy on both sides, so the gateway refuses what the operator would.
    assert.deepEqual(
      { ...gw.sandbox, backend: undefined, maxConcurrentRuns: undefined },
      { ...op.sandbox, backend: undefined, maxConcurrentRuns: undefined },
    );
    assert.deepEqual(
      [gw.kubernetes.runtimeClassName, gw.kubernetes.pendingTimeoutSeconds],
      [op.kubernetes.runtimeClassName, op.kubernetes.pendingTimeoutSeconds],
    );
    assert.equal(op.kubernetes.operator.imagePullPolicy, 'IfNotPresent');
    // Pools are the Docker backend's: the Kubernetes configs set none.
    assert.doesNotMatch(configText(docs, 'sandpit-gateway'), /pool/);
    assert.doesNotMatch(configText(docs, 'sandpit-operator'), /pool/);
  });

  test('non-default values: image, replicas, namespaces, runtimeClass, pending timeout, token, service, extraConfig', async () => {
    const docs = await render({
      release: 'ai',
      namespace: 'agents',
      values: {
        image: {
          repository: 'registry.example/sandpit',
          tag: '9.9.9',
          pullPolicy: 'Always',
        },
        imagePullSecrets: [{ name: 'regcred' }],
        'operator.replicas': 3,
        'operator.watchNamespaces': ['agents', 'team-b'],
        'operator.probePort': 9100,
        'operator.logLevel': 'debug',
        sandbox: {
          runtimeClassName: 'gvisor',
          allowedRuntimeClasses: ['gvisor', 'kata'],
          pendingTimeoutSeconds: 45,
          maxCpu: '500m',
          maxMemory: '1Gi',
          timeoutSeconds: 300,
          imageAllowlist: ['sandpit/*', 'registry.example/tools/*'],
        },
        'gateway.auth.token': 'sekrit-token-123',
        'gateway.service': { type: 'NodePort', port: 80, nodePort: 30080, annotations: { a: 'b' } },
        'gateway.port': 9000,
        'gateway.replicas': 2,
        'gateway.allowedHosts': ['sandpit.example.com'],
        'gateway.extraConfig': { sandbox: { maxQueuedRuns: 5 }, auth: { tokens: [] } },
      },
    });
    const op = deployment(docs, 'ai-sandpit-operator');
    assert.equal(op.spec.replicas, 3);
    const c = op.spec.template.spec.containers[0]!;
    assert.equal(c.image, 'registry.example/sandpit:9.9.9');
    assert.equal((c as unknown as { imagePullPolicy: string }).imagePullPolicy, 'Always');
    assert.deepEqual((op.spec.template.spec as unknown as { imagePullSecrets: unknown }).imagePullSecrets, [
      { name: 'regcred' },
    ]);
    assert.equal(c.ports?.[0]?.containerPort, 9100);
    const opCfg = loadPodConfig(docs, 'ai-sandpit-operator');
    assert.deepEqual(opCfg.kubernetes.operator.namespaces, ['agents', 'team-b']);
    assert.equal(opCfg.kubernetes.runtimeClassName, 'gvisor');
    assert.deepEqual(opCfg.kubernetes.allowedRuntimeClasses, ['gvisor', 'kata']);
    assert.equal(opCfg.kubernetes.pendingTimeoutSeconds, 45);
    assert.equal(opCfg.kubernetes.operator.probePort, 9100);
    assert.equal(opCfg.kubernetes.operator.leaseNamespace, 'agents');
    assert.equal(opCfg.logging.level, 'debug');
    assert.equal(opCfg.sandbox.maxCpu, 500);
    assert.equal(opCfg.sandbox.maxMemory, 1024 ** 3);
    assert.equal(opCfg.sandbox.timeoutSeconds, 300);

    const secret = find(docs, 'Secret', 'ai-sandpit-gateway') as K8sObject & { data: { token: string } };
    assert.equal(Buffer.from(secret.data.token, 'base64').toString(), 'sekrit-token-123');
    const svc = find(docs, 'Service', 'ai-sandpit-gateway') as K8sObject & {
      spec: { type: string; ports: { port: number; nodePort?: number; targetPort: string }[] };
    };
    assert.equal(svc.spec.type, 'NodePort');
    assert.deepEqual(svc.spec.ports[0], {
      name: 'http',
      port: 80,
      targetPort: 'http',
      protocol: 'TCP',
      nodePort: 30080,
    });
    assert.deepEqual(svc.metadata.annotations, { a: 'b' });
    assert.equal(deployment(docs, 'ai-sandpit-gateway').spec.replicas, 2);
    const gwCfg = loadPodConfig(docs, 'ai-sandpit-gateway', { SANDPIT_AUTH_TOKEN: 'sekrit-token-123' });
    assert.equal(gwCfg.server.port, 9000);
    assert.equal(gwCfg.server.stateless, true, 'two replicas: stateless');
    assert.deepEqual(gwCfg.server.allowedHosts, ['sandpit.example.com', 'localhost']);
    assert.equal(gwCfg.sandbox.maxQueuedRuns, 5, 'extraConfig merged');
    assert.equal(gwCfg.kubernetes.gateway.namespace, 'agents');
    assert.equal(gwCfg.kubernetes.runtimeClassName, 'gvisor');
    // With allowedHosts the probes send a Host header the gateway accepts.
    assert.deepEqual(containerOf(docs, 'ai-sandpit-gateway').readinessProbe?.httpGet?.httpHeaders, [
      { name: 'Host', value: 'localhost' },
    ]);
    // Pods roll when their config changes.
    const base = await render({
      release: 'ai',
      namespace: 'agents',
      values: { 'operator.watchNamespaces': ['agents'] },
    });
    const ann = (docs2: K8sObject[]): string | undefined =>
      (
        deployment(docs2, 'ai-sandpit-operator').spec.template as unknown as {
          metadata: { annotations: Record<string, string> };
        }
      ).metadata.annotations['checksum/config'];
    assert.notEqual(ann(docs), ann(base));
  });

  test('gateway.pickupTimeoutSeconds reaches the config; the old name admitTimeoutSeconds still does', async () => {
    const env = { SANDPIT_AUTH_TOKEN: 'x'.repeat(8) };
    const renamed = await render({ values: { 'gateway.pickupTimeoutSeconds': 45 } });
    assert.equal(loadPodConfig(renamed, 'sandpit-gateway', env).kubernetes.gateway.pickupTimeoutSeconds, 45);
    const old = await render({ values: { 'gateway.admitTimeoutSeconds': 12 } });
    assert.equal(loadPodConfig(old, 'sandpit-gateway', env).kubernetes.gateway.pickupTimeoutSeconds, 12);
  });

  test('an existing Secret replaces the generated one', async () => {
    const docs = await render({
      values: { 'gateway.auth': { existingSecret: 'my-token', existingSecretKey: 'bearer' } },
    });
    assert.ok(!docs.some((d) => d.kind === 'Secret'));
    const env = containerOf(docs, 'sandpit-gateway').env?.find((e) => e.name === 'SANDPIT_AUTH_TOKEN');
    assert.deepEqual(env?.valueFrom?.secretKeyRef, { name: 'my-token', key: 'bearer' });
  });

  test('a run namespace of its own: the gateway Role and RoleBinding there, the Lease role in the release namespace', async () => {
    const docs = await render({ values: { 'gateway.runNamespace': 'agents' } });
    assert.equal(find(docs, 'Role', 'sandpit-gateway').metadata.namespace, 'agents');
    const binding = find(docs, 'RoleBinding', 'sandpit-gateway') as K8sObject & {
      subjects: { kind: string; name: string; namespace: string }[];
    };
    assert.equal(binding.metadata.namespace, 'agents');
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'sandpit-gateway', namespace: NS }]);
    assert.equal(find(docs, 'Role', 'sandpit-gateway-operator-health').metadata.namespace, NS);
    assert.equal(
      loadPodConfig(docs, 'sandpit-gateway', { SANDPIT_AUTH_TOKEN: 'x'.repeat(8) }).kubernetes.gateway
        .namespace,
      'agents',
    );
  });

  test('a run namespace the operator does not watch fails the render with a reason', async () => {
    const res = await helm([
      'template',
      'sandpit',
      CHART,
      '--set-json',
      'operator.watchNamespaces=["team-a"]',
      '--set',
      'gateway.runNamespace=agents',
    ]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /gateway\.runNamespace "agents" is not in operator\.watchNamespaces/);
  });

  test('the test-cluster override: host network, API server address, loopback binds and probes, one replica without a PDB', async () => {
    const docs = await render({
      values: { hostNetwork: true, apiServer: { host: '127.0.0.1', port: 6443 }, 'operator.replicas': 1 },
    });
    assert.ok(!docs.some((d) => d.kind === 'PodDisruptionBudget'), 'no PDB for one replica');
    for (const name of ['sandpit-operator', 'sandpit-gateway']) {
      const pod = podOf(docs, name);
      assert.equal(pod.hostNetwork, true);
      const env = Object.fromEntries((pod.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
      assert.equal(env.KUBERNETES_SERVICE_HOST, '127.0.0.1');
      assert.equal(env.KUBERNETES_SERVICE_PORT, '6443');
      const probes = [pod.containers[0]!.readinessProbe!, pod.containers[0]!.livenessProbe!];
      for (const p of probes)
        assert.equal((p.httpGet ?? p.tcpSocket)?.host, '127.0.0.1', `${name}: probe host`);
    }
    // A new pod cannot start beside the old one on the node's ports: upgrades replace, then start.
    for (const name of ['sandpit-operator', 'sandpit-gateway'])
      assert.deepEqual((deployment(docs, name).spec as unknown as { strategy: unknown }).strategy, {
        type: 'RollingUpdate',
        rollingUpdate: { maxSurge: 0, maxUnavailable: 1 },
      });
    assert.equal(loadPodConfig(docs, 'sandpit-operator').kubernetes.operator.probeHost, '127.0.0.1');
    assert.equal(
      loadPodConfig(docs, 'sandpit-gateway', { SANDPIT_AUTH_TOKEN: 'x'.repeat(8) }).server.host,
      '127.0.0.1',
    );
    // Without the override, nothing of it.
    const plain = await render();
    for (const name of ['sandpit-operator', 'sandpit-gateway']) {
      assert.ok(!(containerOf(plain, name).env ?? []).some((e) => e.name.startsWith('KUBERNETES_')));
      assert.equal((deployment(plain, name).spec as unknown as { strategy?: unknown }).strategy, undefined);
    }
  });

  test('NetworkPolicies: ingress only on the gateway port and the operator probe port; peers from values', async () => {
    const docs = await render({
      values: { 'networkPolicy.gatewayFrom': [{ namespaceSelector: { matchLabels: { agents: 'true' } } }] },
    });
    type Np = K8sObject & {
      spec: {
        podSelector: { matchLabels: Record<string, string> };
        policyTypes: string[];
        ingress: { ports: { port: number; protocol: string }[]; from?: unknown[] }[];
      };
    };
    const gw = find(docs, 'NetworkPolicy', 'sandpit-gateway') as Np;
    assert.deepEqual(
      gw.spec.podSelector.matchLabels,
      deployment(docs, 'sandpit-gateway').spec.selector.matchLabels,
    );
    assert.deepEqual(gw.spec.policyTypes, ['Ingress']);
    assert.deepEqual(gw.spec.ingress, [
      {
        ports: [{ port: 8080, protocol: 'TCP' }],
        from: [{ namespaceSelector: { matchLabels: { agents: 'true' } } }],
      },
    ]);
    const op = find(docs, 'NetworkPolicy', 'sandpit-operator') as Np;
    assert.deepEqual(
      op.spec.podSelector.matchLabels,
      deployment(docs, 'sandpit-operator').spec.selector.matchLabels,
    );
    assert.deepEqual(op.spec.ingress, [{ ports: [{ port: 8081, protocol: 'TCP' }] }]);
    const off = await render({ values: { 'networkPolicy.enabled': false } });
    assert.ok(!off.some((d) => d.kind === 'NetworkPolicy'));
  });

  test('ServiceMonitors only where monitoring.coreos.com/v1 is served; the gateway one with the bearer token', async () => {
    const without = await render();
    assert.ok(!without.some((d) => d.kind === 'ServiceMonitor'));
    const docs = await render({
      flags: ['--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor'],
      values: { 'serviceMonitor.labels': { release: 'prom' } },
    });
    type Sm = K8sObject & {
      spec: {
        selector: { matchLabels: Record<string, string> };
        endpoints: { port: string; path: string; bearerTokenSecret?: { name: string; key: string } }[];
      };
    };
    const op = find(docs, 'ServiceMonitor', 'sandpit-operator') as Sm;
    assert.equal(op.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(op.metadata.labels?.release, 'prom');
    assert.deepEqual(
      op.spec.endpoints.map((e) => [e.port, e.path]),
      [['metrics', '/metrics']],
    );
    const svc = find(docs, 'Service', 'sandpit-operator-metrics') as K8sObject & {
      metadata: { labels: Record<string, string> };
    };
    for (const [k, v] of Object.entries(op.spec.selector.matchLabels))
      assert.equal(svc.metadata.labels[k], v);
    const gw = find(docs, 'ServiceMonitor', 'sandpit-gateway') as Sm;
    assert.deepEqual(gw.spec.endpoints[0]?.bearerTokenSecret, { name: 'sandpit-gateway', key: 'token' });
    const off = await render({
      flags: ['--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor'],
      values: { 'serviceMonitor.enabled': false },
    });
    assert.ok(!off.some((d) => d.kind === 'ServiceMonitor'));
  });

  test('components can be turned off: the operator alone, the gateway alone', async () => {
    const opOnly = await render({ values: { 'gateway.enabled': false } });
    assert.ok(
      opOnly.every((d) =>
        ['operator', 'seccomp-installer'].includes(d.metadata.labels?.['app.kubernetes.io/component'] ?? ''),
      ),
    );
    const gwOnly = await render({ values: { 'operator.enabled': false } });
    assert.ok(gwOnly.length > 0);
    assert.ok(gwOnly.every((d) => d.metadata.labels?.['app.kubernetes.io/component'] === 'gateway'));
  });

  test("sandbox pods' seccomp profiles: the operator uses sandpit's localhost profiles, a DaemonSet installs exactly the generated files", async () => {
    const docs = await render();
    const op = loadPodConfig(docs, 'sandpit-operator').kubernetes.operator;
    assert.equal(op.seccompProfile, 'Localhost');
    assert.deepEqual(op.gvisorRuntimeClasses, ['gvisor']);
    const profiles = find(docs, 'ConfigMap', 'sandpit-seccomp') as K8sObject & {
      data: Record<string, string>;
    };
    const generated = generatedSeccompFiles();
    assert.deepEqual(Object.keys(profiles.data).sort(), ['gvisor.json', 'runc.json']);
    for (const f of generated) assert.equal(profiles.data[path.basename(f.path)], f.text, f.path);
    const ds = find(docs, 'DaemonSet', 'sandpit-seccomp') as K8sObject & {
      spec: { template: { spec: PodSpec } };
    };
    const pod = ds.spec.template.spec;
    assert.equal(pod.automountServiceAccountToken, false);
    const host = (pod.volumes ?? []).filter((v) => v.hostPath);
    assert.deepEqual(
      host.map((v) => v.hostPath),
      [{ path: '/var/lib/kubelet/seccomp', type: 'DirectoryOrCreate' }],
      'one host directory: the kubelet seccomp root',
    );
    assert.deepEqual(pod.containers[0]?.securityContext?.capabilities, { drop: ['ALL'] });
    const off = await render({ values: { 'sandbox.seccomp.profile': 'RuntimeDefault' } });
    assert.ok(!off.some((d) => d.kind === 'DaemonSet'), 'no installer for RuntimeDefault');
    assert.equal(loadPodConfig(off, 'sandpit-operator').kubernetes.operator.seccompProfile, 'RuntimeDefault');
  });

  test('networkPolicy.enforced: unset leaves the operator setting unset (it warns); true and false reach it', async () => {
    const unset = loadPodConfig(await render(), 'sandpit-operator').kubernetes.operator;
    assert.equal(unset.networkPolicyEnforced, undefined);
    for (const enforced of [true, false]) {
      const docs = await render({ values: { 'networkPolicy.enforced': enforced } });
      assert.equal(
        loadPodConfig(docs, 'sandpit-operator').kubernetes.operator.networkPolicyEnforced,
        enforced,
      );
    }
  });
});
