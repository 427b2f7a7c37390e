/**
 * Sessions on Kubernetes (issue 15), in one run on the test cluster (test/env/kube-cluster.sh),
 * through the real operator (`sandpit operator`, its own RBAC identity) and the gateway's backend
 * (the gateway's RBAC identity):
 *   - an exec of `python3 -c 'print(1)'` in a session (the runner on the pod's attached stdin)
 *     against `kubectl exec` of the same command into the same pod. Target: p50 <= 50 ms.
 *   - session create → ready (Sandbox → the operator's pod → Ready → Lease → attach → open)
 *     against the operator's very pod spec created directly, until it runs. Where the time goes is
 *     printed too, from watches the bench opens before each create.
 */
import { randomBytes } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { LABEL_SESSION, labelValueFor } from '../src/api/v1alpha1/labels.js';
import { SANDBOX, type Sandbox } from '../src/api/v1alpha1/sandbox.js';
import { runCommand } from '../test/support/kube/run.js';
import { withCluster, type KubeCluster } from '../test/support/kube/index.js';
import { podRunning, waitFor } from '../test/support/kube/wait.js';
import { runExec, sessionSpec } from '../test/support/sessions.js';
import { bindGatewayRbac, gatewayBackend } from '../test/contract/kube-gateway.js';
import { startSuite, stopSuite } from '../test/integration/kubernetes/operator-harness.js';
import { getSandbox } from '../test/integration/kubernetes/session-pods.js';
import { interleaved, report, target, type Series } from './stats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const CREATE_ROUNDS = Number(process.env.BENCH_CREATE_ROUNDS ?? 8);
const spec = sessionSpec({ template: 'python' });
const WAIT = { timeoutMs: 120_000 };

const newId = (): string => `ses-${randomBytes(6).toString('hex')}`;

async function kubectlExec(cluster: KubeCluster, ns: string, pod: string): Promise<void> {
  const r = await runCommand(
    cluster.env.kubectl,
    ['exec', '-n', ns, pod, '-c', 'sandbox', '--', 'python3', '-c', 'print(1)'],
    { env: { ...process.env, KUBECONFIG: cluster.env.kubeconfigPath }, timeoutMs: 30_000 },
  );
  if (r.code !== 0 || r.stdout !== '1\n') throw new Error(`kubectl exec: ${r.code} ${r.stdout} ${r.stderr}`);
}

/** Resolves with the time (performance.now()) a watch first saw its object match. */
const seenAt = (p: Promise<unknown>): Promise<number> => p.then(() => performance.now());

/** The operator's pod of a session, as a plain pod of its own (no owner, no session label). */
function rawCopy(pod: V1Pod, name: string): V1Pod {
  if (!pod.spec) throw new Error(`pod ${pod.metadata?.name} has no spec`);
  return {
    metadata: { name, namespace: pod.metadata?.namespace },
    spec: { ...pod.spec, nodeName: undefined },
  };
}

export default async function main(): Promise<void> {
  const cluster = await withCluster();
  const suite = await startSuite(cluster, 'bench-sessions');
  const { ns } = suite;
  await bindGatewayRbac(cluster, ns);
  const backend = gatewayBackend(cluster, ns);
  const podsPath = `/api/v1/namespaces/${ns}/pods`;
  const sandboxesPath = `/apis/${SANDBOX.group}/${SANDBOX.version}/namespaces/${ns}/${SANDBOX.plural}`;
  const sessionPodOf = async (id: string): Promise<V1Pod> =>
    cluster.core.readNamespacedPod({
      namespace: ns,
      name: (await getSandbox(cluster, ns, id)).status?.podName ?? '',
    });
  let failed = false;
  try {
    const id = newId();
    const sandbox = await backend.sessions.createSession(spec, { sessionId: id, principal: 'bench' });
    const pod = (await sessionPodOf(id)).metadata?.name ?? '';
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

    const names = {
      session: 'session (Sandbox → operator → attach → open)',
      raw: "the operator's pod created directly, running",
      pickup: '  Sandbox created → its pod seen',
      start: '  pod seen → pod running',
      detect: '  pod running → Sandbox Ready',
      attach: '  Sandbox Ready → session open',
    };
    const samples = Object.fromEntries(Object.keys(names).map((k) => [k, [] as number[]])) as Record<
      keyof typeof names,
      number[]
    >;
    for (let i = -1; i < CREATE_ROUNDS; i++) {
      const sid = newId();
      const podOf = { path: podsPath, labelSelector: `${LABEL_SESSION}=${labelValueFor(sid)}` };
      const podSeen = seenAt(waitFor(cluster.kc, podOf, () => true, WAIT));
      const podUp = seenAt(waitFor<V1Pod>(cluster.kc, podOf, podRunning, WAIT));
      const ready = seenAt(
        waitFor<Sandbox>(
          cluster.kc,
          { path: sandboxesPath, name: sid },
          (o) => o.status?.phase === 'Ready',
          WAIT,
        ),
      );
      const t0 = performance.now();
      const session = await backend.sessions.createSession(spec, { sessionId: sid, principal: 'bench' });
      const t1 = performance.now();
      const [seen, up, readyAt] = await Promise.all([podSeen, podUp, ready]);
      const body = rawCopy(await sessionPodOf(sid), `raw-${sid}`);
      await session.close('Deleted');
      const rawUp = seenAt(
        waitFor<V1Pod>(cluster.kc, { path: podsPath, name: `raw-${sid}` }, podRunning, WAIT),
      );
      const t2 = performance.now();
      await cluster.core.createNamespacedPod({ namespace: ns, body });
      const rawMs = (await rawUp) - t2;
      await cluster.core.deleteNamespacedPod({ namespace: ns, name: `raw-${sid}`, gracePeriodSeconds: 0 });
      if (i < 0) continue; // warm-up
      samples.session.push(t1 - t0);
      samples.raw.push(rawMs);
      samples.pickup.push(seen - t0);
      samples.start.push(up - seen);
      samples.detect.push(readyAt - up);
      samples.attach.push(t1 - readyAt);
    }
    const out: Series[] = Object.entries(names).map(([k, name]) => ({
      name,
      samples: samples[k as keyof typeof names],
    }));
    report('kubernetes: session create → ready, through the operator', out, names.raw);
  } catch (e) {
    failed = true;
    throw e;
  } finally {
    await backend.close();
    await stopSuite(suite, failed, (l) => console.error(l));
  }
}
