/**
 * Sessions on Kubernetes (issue 15), in one run on the test cluster (test/env/kube-cluster.sh), as
 * the gateway's own RBAC identity: an exec of `python3 -c 'print(1)'` in a session (the runner on
 * the pod's attached stdin) against `kubectl exec` of the same command into the same pod; session
 * create → ready against creating the same hardened pod directly and waiting for it to run.
 * Target: session exec p50 <= 50 ms.
 *
 * Until the operator's Sandbox controller lands, the session pods are made by the kube tier's
 * stand-in (test/integration/kubernetes/session-pods.ts: it lists Sandboxes every 100 ms), so the
 * create figure includes up to that pick-up delay instead of the operator's watch.
 */
import { randomBytes } from 'node:crypto';
import { runCommand } from '../test/support/kube/run.js';
import { withCluster, type KubeCluster } from '../test/support/kube/index.js';
import { runExec, sessionSpec } from '../test/support/sessions.js';
import { bindGatewayRbac, gatewayBackend } from '../test/contract/kube-gateway.js';
import { installOperatorApi } from '../test/integration/kubernetes/operator-harness.js';
import {
  getSandbox,
  serveSessionPods,
  sessionPod,
  waitRunnerReady,
} from '../test/integration/kubernetes/session-pods.js';
import { interleaved, report, target } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const CREATE_ROUNDS = Number(process.env.BENCH_CREATE_ROUNDS ?? 6);
const spec = sessionSpec({ template: 'python' });

const newId = (): string => `ses-${randomBytes(6).toString('hex')}`;

async function kubectlExec(cluster: KubeCluster, ns: string, pod: string): Promise<void> {
  const r = await runCommand(
    cluster.env.kubectl,
    ['exec', '-n', ns, pod, '-c', 'sandbox', '--', 'python3', '-c', 'print(1)'],
    { env: { ...process.env, KUBECONFIG: cluster.env.kubeconfigPath }, timeoutMs: 30_000 },
  );
  if (r.code !== 0 || r.stdout !== '1\n') throw new Error(`kubectl exec: ${r.code} ${r.stdout} ${r.stderr}`);
}

export default async function main(): Promise<void> {
  const cluster = await withCluster();
  await installOperatorApi(cluster);
  const ns = await cluster.createNamespace('bench-sessions');
  await bindGatewayRbac(cluster, ns);
  const pods = serveSessionPods(cluster, ns);
  const backend = gatewayBackend(cluster, ns);
  try {
    const id = newId();
    const sandbox = await backend.sessions.createSession(spec, { sessionId: id, principal: 'bench' });
    const pod = (await getSandbox(cluster, ns, id)).status?.podName ?? '';
    const series = await interleaved(ROUNDS, {
      'session exec (attached runner)': async () => {
        const r = await runExec(sandbox, spec, { command: ['python3', '-c', 'print(1)'] });
        if (r.stdout.text !== '1\n') throw new Error(`session exec printed ${r.stdout.text}`);
      },
      'kubectl exec (same pod)': () => kubectlExec(cluster, ns, pod),
    });
    const rows = report("kubernetes: exec of python3 -c 'print(1)'", series, 'kubectl exec (same pod)');
    const s = rows[0]?.p50 ?? Infinity;
    target('session exec p50 <= 50 ms', s <= 50, `${s.toFixed(1)} ms`);
    await sandbox.close('Deleted');

    const samples = { session: [] as number[], pod: [] as number[] };
    for (let i = -1; i < CREATE_ROUNDS; i++) {
      const t0 = performance.now();
      const sid = newId();
      const s = await backend.sessions.createSession(spec, { sessionId: sid, principal: 'bench' });
      const sessionMs = performance.now() - t0;
      const made = await getSandbox(cluster, ns, sid);
      await s.close('Deleted');
      const body = sessionPod(made, { name: `raw-${sid}`, owned: false });
      const t1 = performance.now();
      await cluster.core.createNamespacedPod({ namespace: ns, body });
      await waitRunnerReady(cluster, ns, `raw-${sid}`);
      const podMs = performance.now() - t1;
      await cluster.core.deleteNamespacedPod({ namespace: ns, name: `raw-${sid}`, gracePeriodSeconds: 0 });
      if (i < 0) continue; // warm-up
      samples.session.push(sessionMs);
      samples.pod.push(podMs);
    }
    report(
      'kubernetes: session create → ready (its runner answered the open)',
      [
        { name: 'session (Sandbox → pod → Lease → attach → open)', samples: samples.session },
        { name: 'the same pod created directly, until running', samples: samples.pod },
      ],
      'the same pod created directly, until running',
    );
  } finally {
    pods.stop();
    await backend.close();
    await cluster.deleteNamespace(ns);
  }
}
