// charts/sandpit installed with helm into the real v1.20 cluster, running the app image built
// offline (images/build-app.sh): a SandboxRun applied with kubectl reaches Succeeded through the
// operator running as a pod, the gateway pod answers MCP with its bearer token, the values' pools
// are SandboxPools in the gateway's and the tenant's namespaces, and helm uninstall removes every
// object the release made.
//
// This cluster has no kube-proxy, and a pod's own network interface leads nowhere: a pod cannot
// reach the API server through the `kubernetes` Service. The chart's documented override for that
// case is used here only:
// hostNetwork plus apiServer.host/port = the loopback API server (its certificate names
// 127.0.0.1). The pods then bind 127.0.0.1 on ports this test picks, and the test talks to the
// gateway on loopback only.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callTool, connectHttp, ensureBuilt, freePort, textOf } from '../../e2e/helpers.js';
import { generatedSeccompFiles } from '../../../src/policy/seccomp.js';
import { REPO_ROOT } from '../../support/kube/env.js';
import { type KubeCluster, kubeTest, runOk } from '../../support/kube/index.js';
import { applyHelloSample } from './operator-harness.js';
import { eventually } from '../../support/sessions.js';

const CHART = path.join(REPO_ROOT, 'charts/sandpit');
const BUILD_APP = path.join(REPO_ROOT, 'images/build-app.sh');
const INSTANCE_LABEL = 'app.kubernetes.io/instance';
const NAMESPACED_KINDS =
  'deployments,daemonsets,replicasets,pods,services,configmaps,secrets,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets,sandboxpools';
const CLUSTER_KINDS = 'clusterroles,clusterrolebindings';

/**
 * The app image for this checkout: dist/ built, then images/build-app.sh into dockerd (a no-op when
 * current), then copied into the node's containerd (a no-op when it has that image id already).
 */
async function buildAppImage(cluster: KubeCluster, t: { diagnostic(msg: string): void }): Promise<string> {
  ensureBuilt();
  const started = Date.now();
  const build = await runOk('bash', [BUILD_APP], { cwd: REPO_ROOT, timeoutMs: 20 * 60_000 });
  t.diagnostic(`images/build-app.sh: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  t.diagnostic(build.stderr.trim().split('\n').at(-1) ?? '');
  const image = (await runOk('bash', [BUILD_APP, '--tag'])).stdout.trim();
  const loaded = await cluster.script(['images', image], { timeoutMs: 5 * 60_000 });
  assert.equal(loaded.code, 0, loaded.stderr);
  await cluster.requireNodeImage(image);
  return image;
}

async function namesOf(
  cluster: KubeCluster,
  kinds: string,
  selector: string,
  ns?: string,
): Promise<string[]> {
  const res = await cluster.kubectl(['get', kinds, ...(ns ? ['-n', ns] : []), '-l', selector, '-o', 'name']);
  assert.equal(res.code, 0, res.stderr);
  return res.stdout.split('\n').filter(Boolean);
}

describe('charts/sandpit on the real cluster', () => {
  test(
    'helm install runs the operator and the gateway as pods; a kubectl-applied SandboxRun succeeds; helm uninstall removes the release',
    { timeout: 25 * 60_000 },
    kubeTest(async ({ t, cluster, ns }) => {
      const image = await buildAppImage(cluster, t);
      const [repository, tag] = image.split(':') as [string, string];
      const api = new URL(cluster.env.apiServer);
      const release = `sp-${randomBytes(3).toString('hex')}`;
      const token = randomBytes(24).toString('hex');
      // A tenant: its own namespace (made here, so the test's clean-up removes it), its token, its quota.
      const tenantNs = await cluster.createNamespace('helm-tenant');
      const tenantToken = randomBytes(24).toString('hex');
      const [probePort, gatewayPort] = [await freePort(), await freePort()];
      const values = {
        image: { repository, tag, pullPolicy: 'Never' },
        // the test-cluster override (charts/sandpit/README.md)
        hostNetwork: true,
        apiServer: { host: api.hostname, port: Number(api.port) },
        // host networking on one node: one replica (two would share the probe port)
        'operator.replicas': 1,
        'operator.probePort': probePort,
        'operator.watchNamespaces': [ns],
        'gateway.port': gatewayPort,
        'gateway.auth.token': token,
        // images are local to this cluster's engine: never ask a registry
        'sandbox.imagePullPolicy': 'Never',
        // the profile installer writes into this cluster's kubelet seccomp root (--seccomp-profile-root)
        'sandbox.seccomp.installer.hostPath': path.join(cluster.env.stateDir, 'kubelet', 'seccomp'),
        // the test cluster's pod interface leads nowhere (see operator-process.ts)
        'networkPolicy.enforced': true,
        'tenants.namespaces': [{ name: tenantNs, quota: { sandboxRuns: 5 } }],
        'gateway.extraConfig': {
          auth: { tokens: [{ name: 'tenant', token: tenantToken, namespace: tenantNs }] },
        },
      };
      const setArgs = Object.entries(values).flatMap(([k, v]) => ['--set-json', `${k}=${JSON.stringify(v)}`]);
      // A pool in every namespace the gateway serves. Not in the server dry run: until the install
      // has put the chart's CRDs in, the API server may not know the kind.
      const pools = [{ name: 'python', template: 'python', replicas: 1, maxIdleSeconds: 600 }];
      const poolArgs = ['--set-json', `pools=${JSON.stringify(pools)}`];
      const selector = `${INSTANCE_LABEL}=${release}`;
      let uninstalled = false;
      try {
        // The API server decides the PodDisruptionBudget's version: v1.20 serves policy/v1beta1 only.
        const dry = await cluster.helm(
          [
            'install',
            release,
            CHART,
            '-n',
            ns,
            ...setArgs,
            '--set-json',
            'operator.replicas=2',
            '--dry-run=server',
          ],
          { timeoutMs: 60_000 },
        );
        assert.equal(dry.code, 0, dry.stderr);
        assert.match(dry.stdout, /apiVersion: policy\/v1beta1\nkind: PodDisruptionBudget/);

        let started = Date.now();
        const install = await cluster.helm(
          ['install', release, CHART, '-n', ns, ...setArgs, ...poolArgs, '--wait', '--timeout', '180s'],
          { timeoutMs: 240_000 },
        );
        assert.equal(install.code, 0, `helm install: ${install.stderr}`);
        t.diagnostic(`helm install --wait: ${((Date.now() - started) / 1000).toFixed(1)} s`);
        const list = await cluster.helm(['list', '-n', ns, '--output', 'json']);
        assert.deepEqual(
          (JSON.parse(list.stdout) as { name: string; status: string }[]).map((r) => [r.name, r.status]),
          [[release, 'deployed']],
        );
        for (const where of [ns, tenantNs]) {
          const pool = await cluster.kubectl(['get', 'sandboxpool', 'python', '-n', where, '-o', 'json']);
          assert.equal(pool.code, 0, `the values' pool in ${where}: ${pool.stderr}`);
          const obj = JSON.parse(pool.stdout) as {
            spec: Record<string, unknown>;
            metadata: { labels: Record<string, string> };
          };
          assert.deepEqual(
            [obj.spec.template, obj.spec.replicas, obj.spec.maxIdleSeconds, obj.spec.mode],
            ['python', 1, 600, 'run'],
            'the values, and the CRD default mode',
          );
          assert.equal(obj.metadata.labels[INSTANCE_LABEL], release);
        }

        // Both pods run the app image, ready (their readiness probes passed on loopback).
        const pods = (await cluster.core.listNamespacedPod({ namespace: ns, labelSelector: selector })).items;
        const byComponent = (c: string): V1Pod => {
          const p = pods.find((x) => x.metadata?.labels?.['app.kubernetes.io/component'] === c);
          assert.ok(p, `a ${c} pod`);
          return p;
        };
        for (const c of ['operator', 'gateway']) {
          const pod = byComponent(c);
          assert.equal(pod.spec?.containers[0]?.image, image);
          assert.equal(pod.spec?.securityContext?.runAsUser, 1000);
          assert.equal(pod.spec?.containers[0]?.securityContext?.readOnlyRootFilesystem, true);
          assert.ok(
            pod.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True'),
            `${c} Ready`,
          );
        }
        const operatorPod = byComponent('operator').metadata!.name!;
        // The seccomp profile installer ran on the node: the kubelet's seccomp root holds the chart's files.
        const installer = byComponent('seccomp-installer');
        assert.ok(installer.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True'));
        assert.match(
          await cluster.podLog(ns, installer.metadata!.name!),
          /sandpit seccomp profiles installed/,
        );
        for (const f of generatedSeccompFiles()) {
          const onNode = path.join(
            cluster.env.stateDir,
            'kubelet',
            'seccomp',
            'sandpit',
            path.basename(f.path),
          );
          assert.equal(readFileSync(onNode, 'utf8'), f.text, onNode);
        }

        // A SandboxRun applied with kubectl, reconciled by the operator pod.
        await applyHelloSample(cluster, ns, 90_000);
        // Its log says so (the line follows the status write by a moment).
        const finished = new RegExp(
          `"run":"${ns}/python-hello".*"phase":"Succeeded".*"msg":"Finished SandboxRun"`,
        );
        let opLog = '';
        for (const deadline = Date.now() + 15_000; Date.now() < deadline;) {
          opLog = await cluster.podLog(ns, operatorPod);
          if (finished.test(opLog)) break;
          await new Promise((r) => setTimeout(r, 250));
        }
        assert.match(opLog, finished);
        assert.match(opLog, /"msg":"Acquired Lease"/);

        // The gateway pod: /health on loopback, MCP with the token, 401 without it.
        const base = `http://127.0.0.1:${gatewayPort}`;
        const health = (await (await fetch(`${base}/health`)).json()) as { status: string; detail: string };
        assert.equal(health.status, 'ok', health.detail);
        // ok includes the gateway's permissions in the tenant namespace: the chart bound its Role there.
        assert.match(health.detail, new RegExp(`tenants' in ${tenantNs}`));
        const anonymous = await fetch(`${base}/metrics`);
        assert.equal(anonymous.status, 401);
        await anonymous.body?.cancel();
        const conn = await connectHttp(`${base}/mcp`, token);
        try {
          const result: CallToolResult = await callTool(conn.client, 'run_code', {
            language: 'python',
            code: 'print(6 * 7)',
          });
          assert.ok(!result.isError, textOf(result));
          const r = result.structuredContent as { exitCode: number; stdout: string; phase: string };
          assert.equal(r.phase, 'Succeeded');
          assert.equal(r.exitCode, 0);
          assert.equal(r.stdout, '42\n');
        } finally {
          await conn.close();
        }
        // The tenant's token: its run is a SandboxRun in its namespace, under the chart's quota. On a
        // cluster that just got the CRDs, Kubernetes' quota controller counts them only at its next
        // full resync (up to 5 min); until then the gateway refuses the run as busy (errors.ts).
        const counting = Date.now();
        const counted = await eventually(
          async () => {
            const q = await cluster.core.readNamespacedResourceQuota({
              namespace: tenantNs,
              name: `${release}-sandpit-tenant`,
            });
            return q.status?.used?.['count/sandboxruns.sandpit.dev'] !== undefined;
          },
          330_000,
          500,
        );
        assert.ok(counted, "the tenant quota counts SandboxRuns within the quota controller's resync");
        if (Date.now() - counting > 1000)
          t.diagnostic(
            `the tenant quota counted SandboxRuns after ${((Date.now() - counting) / 1000).toFixed(1)} s`,
          );
        const tenantConn = await connectHttp(`${base}/mcp`, tenantToken);
        try {
          const result: CallToolResult = await callTool(tenantConn.client, 'run_code', {
            language: 'python',
            code: 'print("tenant")',
          });
          assert.ok(!result.isError, textOf(result));
          const r = result.structuredContent as { runId: string; stdout: string; phase: string };
          assert.equal(r.phase, 'Succeeded');
          assert.equal(r.stdout, 'tenant\n');
          const runs = await cluster.kubectl(['get', 'sandboxruns', '-n', tenantNs, '-o', 'name']);
          assert.deepEqual(runs.stdout.split('\n').filter(Boolean), [`sandboxrun.sandpit.dev/${r.runId}`]);
          const quota = await cluster.core.readNamespacedResourceQuota({
            namespace: tenantNs,
            name: `${release}-sandpit-tenant`,
          });
          assert.equal(quota.spec?.hard?.['count/sandboxruns.sandpit.dev'], '5');
        } finally {
          await tenantConn.close();
        }

        // helm upgrade without the token in the values: the Secret keeps it (lookup), the pods are
        // replaced (new config), and the new gateway takes the same token.
        const secretBefore = await cluster.core.readNamespacedSecret({
          namespace: ns,
          name: `${release}-sandpit-gateway`,
        });
        started = Date.now();
        const upgrade = await cluster.helm(
          [
            'upgrade',
            release,
            CHART,
            '-n',
            ns,
            ...setArgs,
            ...poolArgs,
            '--set-json',
            'gateway.auth.token=""',
            '--set',
            'gateway.logLevel=debug,operator.logLevel=debug',
            '--wait',
            '--timeout',
            '180s',
          ],
          { timeoutMs: 240_000 },
        );
        assert.equal(upgrade.code, 0, `helm upgrade: ${upgrade.stderr}`);
        t.diagnostic(`helm upgrade --wait: ${((Date.now() - started) / 1000).toFixed(1)} s`);
        const secretAfter = await cluster.core.readNamespacedSecret({
          namespace: ns,
          name: `${release}-sandpit-gateway`,
        });
        assert.equal(secretAfter.data?.token, secretBefore.data?.token);
        assert.equal(Buffer.from(secretAfter.data?.token ?? '', 'base64').toString(), token);
        const newPods = (await cluster.core.listNamespacedPod({ namespace: ns, labelSelector: selector }))
          .items;
        assert.ok(
          newPods.some(
            (p) =>
              p.metadata?.labels?.['app.kubernetes.io/component'] === 'operator' &&
              p.metadata.name !== operatorPod &&
              p.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True'),
          ),
          'a new operator pod, ready',
        );
        const authed = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${token}` } });
        assert.equal(authed.status, 200);
        await authed.body?.cancel();

        // helm uninstall: every object of the release goes, cluster-wide ones included.
        started = Date.now();
        const uninstall = await cluster.helm(
          ['uninstall', release, '-n', ns, '--wait', '--timeout', '120s'],
          {
            timeoutMs: 180_000,
          },
        );
        assert.equal(uninstall.code, 0, uninstall.stderr);
        uninstalled = true;
        // Pods go with their ReplicaSets (garbage collection, then the kubelet stops them).
        let left: string[] = [];
        for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
          left = await namesOf(cluster, NAMESPACED_KINDS, selector, ns);
          if (left.length === 0) break;
          await new Promise((r) => setTimeout(r, 500));
        }
        // v1.20's kubelet sometimes takes minutes to confirm a pod whose containers have stopped;
        // such a pod is deleted and stopped, only its API object lingers.
        const unconfirmed = (
          await cluster.core.listNamespacedPod({ namespace: ns, labelSelector: selector })
        ).items
          .filter(
            (p) =>
              p.metadata?.deletionTimestamp && !p.status?.containerStatuses?.some((c) => c.state?.running),
          )
          .map((p) => `pod/${p.metadata?.name}`);
        if (unconfirmed.length > 0)
          t.diagnostic(`stopped, deletion not yet confirmed by the kubelet: ${unconfirmed.join(', ')}`);
        assert.deepEqual(
          left.filter((name) => !unconfirmed.includes(name)),
          [],
          'objects of the release left in the namespace',
        );
        const stopped = (Date.now() - started) / 1000;
        t.diagnostic(`helm uninstall until every object was gone: ${stopped.toFixed(1)} s`);
        assert.deepEqual(await namesOf(cluster, CLUSTER_KINDS, selector), [], 'cluster-wide objects left');
        assert.deepEqual(
          await namesOf(cluster, 'roles,rolebindings,resourcequotas,sandboxpools', selector, tenantNs),
          [],
          "the release's objects in the tenant namespace",
        );
        const status = await cluster.helm(['status', release, '-n', ns]);
        assert.notEqual(status.code, 0, 'the release record is gone');
        assert.match(status.stderr, /release: not found/);
      } catch (e) {
        for (const c of ['operator', 'gateway']) {
          const logs = await cluster.kubectl([
            'logs',
            '-n',
            ns,
            '-l',
            `${selector},app.kubernetes.io/component=${c}`,
            '--tail=40',
          ]);
          for (const line of (logs.stdout + logs.stderr).split('\n')) t.diagnostic(`${c}: ${line}`);
        }
        throw e;
      } finally {
        if (!uninstalled) {
          // Best effort after a failure: the release, and what it made cluster-wide.
          await cluster.helm(['uninstall', release, '-n', ns, '--timeout', '60s'], { timeoutMs: 90_000 });
          await cluster.kubectl(['delete', CLUSTER_KINDS, '-l', selector, '--ignore-not-found']);
        }
        await cluster.deleteNamespace(tenantNs);
      }
    }),
  );
});
