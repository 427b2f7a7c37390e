// SandboxPools on the real cluster, reconciled by the real operator with the chart's RBAC identity:
// a session pool reaches its replicas of hardened, ready pods (labels, owner, no token, the session
// runner on stdin) with its counts and conditions; kubectl get sbp shows the columns and kubectl
// scale drives it through the /scale subresource; a pod deleted by hand is replaced; a spec change
// replaces every pod; a pod relabelled as a claim leaves it counts as claimed and is replaced, never
// deleted by the pool; a pool the policy refuses has none and says why; deleting the pool removes its
// idle pods; the namespace-wide deny-all NetworkPolicy exists before the first pod and is restored
// when edited or deleted. A run-mode pool's pod is checked as built (stdinOnce, `--pool`): its
// runner's pool mode is another part's, so its readiness is not asserted here.
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe } from 'node:test';
import { NetworkingV1Api, type CoreV1Event, type V1NetworkPolicy, type V1Pod } from '@kubernetes/client-node';
import type { SandboxPool, SandboxPoolSpecInput } from '../../../src/api/v1alpha1/sandboxpool.js';
import { DEFAULT_SESSION_CEILINGS } from '../../../src/policy/policy.js';
import { REPO_ROOT, type KubeCluster } from '../../support/kube/index.js';
import { customApi, metricValue, operatorSuite, type Suite } from './operator-harness.js';

const poolApi = { group: 'sandpit.dev', version: 'v1alpha1', plural: 'sandboxpools' };
const RUNNER = '/usr/local/bin/sandpit-runner';
/** The operator's defaults (kubernetes.operator.startGraceSeconds, sandbox.timeoutSeconds). */
const START_GRACE_SECONDS = 120;
const RUN_TIMEOUT_CEILING_SECONDS = 30;
const DENY_ALL = 'sandpit-deny-all';

const poolsPath = (ns: string): string => `/apis/sandpit.dev/v1alpha1/namespaces/${ns}/sandboxpools`;

async function createPool(s: Suite, name: string, spec: SandboxPoolSpecInput): Promise<SandboxPool> {
  const body: SandboxPool = {
    apiVersion: 'sandpit.dev/v1alpha1',
    kind: 'SandboxPool',
    metadata: { name },
    spec,
  };
  return (await customApi(s.cluster).createNamespacedCustomObject({
    ...poolApi,
    namespace: s.ns,
    body,
  })) as SandboxPool;
}

async function patchPool(s: Suite, name: string, patch: object[]): Promise<void> {
  await customApi(s.cluster).patchNamespacedCustomObject({ ...poolApi, namespace: s.ns, name, body: patch });
}

function waitForPool(
  s: Suite,
  name: string,
  predicate: (p: SandboxPool) => boolean,
  what: string,
  timeoutMs = 90_000,
): Promise<SandboxPool> {
  return s.cluster.waitFor<SandboxPool>({ path: poolsPath(s.ns), name }, predicate, {
    timeoutMs,
    description: `SandboxPool ${s.ns}/${name} ${what}`,
  });
}

const condition = (p: SandboxPool, type: string) => p.status?.conditions?.find((c) => c.type === type);

/** Every wanted pod ready, as the status says it, for the current generation. */
const isReady = (replicas: number) => (p: SandboxPool) =>
  p.status?.observedGeneration === p.metadata.generation &&
  p.status?.readyReplicas === replicas &&
  p.status.startingReplicas === 0 &&
  condition(p, 'Ready')?.status === 'True';

/** The pool's pods that are not going away. */
async function livePods(cluster: KubeCluster, ns: string, pool: SandboxPool): Promise<V1Pod[]> {
  const uid = pool.metadata.uid ?? '';
  const pods = await cluster.core.listNamespacedPod({
    namespace: ns,
    labelSelector: `sandpit.dev/pool-uid=${uid}`,
  });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp);
}

/** Polls `probe` until it returns a value (not undefined), or fails with `what`. */
async function eventually<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 90_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function poolEvents(s: Suite, pool: SandboxPool): Promise<CoreV1Event[]> {
  return (await s.cluster.core.listNamespacedEvent({ namespace: s.ns })).items.filter(
    (e) => e.involvedObject.kind === 'SandboxPool' && e.involvedObject.uid === pool.metadata.uid,
  );
}

const networking = (s: Suite): NetworkingV1Api => s.cluster.kc.makeApiClient(NetworkingV1Api);

const readDenyAll = (s: Suite): Promise<V1NetworkPolicy> =>
  networking(s).readNamespacedNetworkPolicy({ namespace: s.ns, name: DENY_ALL });

/** Watches the namespace's pods from now on: the resourceVersion each pod was first seen at (its creation). */
function recordPodCreations(s: Suite): { firstSeen: Map<string, number>; stop: () => void } {
  const firstSeen = new Map<string, number>();
  const stopper = new AbortController();
  s.cluster
    .waitFor<V1Pod>(
      { path: `/api/v1/namespaces/${s.ns}/pods` },
      (pod, type) => {
        const name = pod.metadata?.name ?? '';
        if (type === 'ADDED' && !firstSeen.has(name))
          firstSeen.set(name, Number(pod.metadata?.resourceVersion));
        return false;
      },
      { timeoutMs: 3_600_000, signal: stopper.signal },
    )
    .catch(() => undefined);
  return { firstSeen, stop: () => stopper.abort() };
}

describe('SandboxPools on the real cluster', { timeout: 900_000 }, () => {
  const ops = operatorSuite('operator-pools');
  const { it } = ops;

  it('a session pool reaches its ready pods, hardened and labelled; the deny-all policy came first; kubectl get and kubectl scale', async () => {
    const s = ops.suite;
    const { cluster, ns } = s;
    const creations = recordPodCreations(s);
    const made = await createPool(s, 'sessions', {
      template: 'python',
      mode: 'session',
      resources: { cpu: '500m', memory: '128Mi' },
      replicas: 2,
      maxIdleSeconds: 600,
    });
    const ready = await waitForPool(s, 'sessions', isReady(2), 'to have 2 ready pods');
    const st = ready.status ?? {};
    assert.equal(st.replicas, 2);
    assert.equal(st.claimedReplicas, 0);
    assert.equal(st.selector, `sandpit.dev/pool-uid=${made.metadata.uid},sandpit.dev/pool-pod=idle`);
    assert.equal(condition(ready, 'Stalled')?.status, 'False');
    assert.equal(condition(ready, 'Reconciling')?.status, 'False');
    for (const c of st.conditions ?? []) assert.equal(c.observedGeneration, ready.metadata.generation);

    const pods = await livePods(cluster, ns, made);
    assert.equal(pods.length, 2);
    const shapes = new Set<string>();
    for (const pod of pods) {
      const labels = pod.metadata?.labels ?? {};
      assert.equal(labels['sandpit.dev/managed-by'], 'sandpit-operator');
      assert.equal(labels['sandpit.dev/pool'], 'sessions');
      assert.equal(labels['sandpit.dev/pool-pod'], 'idle');
      assert.match(labels['sandpit.dev/pool-shape'] ?? '', /^[0-9a-f]{32}$/);
      shapes.add(labels['sandpit.dev/pool-shape'] ?? '');
      assert.match(pod.metadata?.name ?? '', /^sessions-[a-z0-9]{5}$/);
      const owner = pod.metadata?.ownerReferences ?? [];
      assert.deepEqual(
        owner.map((o) => ({ kind: o.kind, uid: o.uid, controller: o.controller })),
        [{ kind: 'SandboxPool', uid: made.metadata.uid, controller: true }],
      );
      const spec = pod.spec!;
      const c = spec.containers[0]!;
      // Waiting through its idle life and, once claimed, a whole session's.
      const openWithin = String(600 + DEFAULT_SESSION_CEILINGS.maxTtlSeconds);
      assert.deepEqual(c.command, [RUNNER, '--session', '--open-within', openWithin]);
      assert.equal(c.stdin, true);
      assert.equal(c.stdinOnce ?? false, false);
      // The template's variables, as a Sandbox's own pod has them (only a Sandbox with these is served).
      assert.equal(c.env?.find((e) => e.name === 'PYTHONUNBUFFERED')?.value, '1');
      assert.equal(
        spec.activeDeadlineSeconds,
        600 + DEFAULT_SESSION_CEILINGS.maxTtlSeconds + START_GRACE_SECONDS,
      );
      assert.equal(spec.automountServiceAccountToken, false);
      assert.equal(spec.enableServiceLinks, false);
      assert.equal(spec.dnsPolicy, 'None');
      assert.equal(spec.securityContext?.runAsNonRoot, true);
      assert.equal(spec.securityContext?.runAsUser, 1000);
      assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
      assert.equal(c.securityContext?.allowPrivilegeEscalation, false);
      assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL']);
      assert.deepEqual(c.resources?.limits, { cpu: '500m', memory: '128Mi' });
      assert.equal(
        (c.volumeMounts ?? []).some((m) => m.mountPath.includes('serviceaccount')),
        false,
        'no service-account token mounted',
      );
    }
    assert.equal(shapes.size, 1, 'one shape label');

    // The namespace-wide deny-all: every sandpit pod, both directions, no rules; made before any pod.
    const policy = await readDenyAll(s);
    assert.deepEqual(policy.spec?.podSelector?.matchLabels, { 'sandpit.dev/managed-by': 'sandpit-operator' });
    assert.deepEqual([...(policy.spec?.policyTypes ?? [])].sort(), ['Egress', 'Ingress']);
    assert.equal((policy.spec?.ingress ?? []).length + (policy.spec?.egress ?? []).length, 0);
    creations.stop();
    const policyVersion = Number(policy.metadata?.resourceVersion);
    const podVersions = pods.map((p) => creations.firstSeen.get(p.metadata?.name ?? ''));
    for (const v of podVersions) {
      assert.ok(v !== undefined, 'the watch saw each pod created');
      assert.ok(policyVersion < v, `the policy (rv ${policyVersion}) before the pod (rv ${v})`);
    }
    // Events are written a moment after they are recorded (controller/events.ts).
    await eventually(
      async () =>
        (await poolEvents(s, made)).filter((e) => e.reason === 'CreatedPod' && e.type === 'Normal').length >=
          2 || undefined,
      'two CreatedPod Events',
    );

    // The operator's metrics: the pool's pods by state, and one refill time per pod it made ready.
    const metrics = await s.operator.metrics();
    const pool = { namespace: ns, pool: 'sessions' };
    assert.equal(metricValue(metrics, 'sandpit_pool_pods', { ...pool, state: 'ready' }), 2);
    assert.equal(metricValue(metrics, 'sandpit_pool_pods', { ...pool, state: 'starting' }), 0);
    assert.equal(metricValue(metrics, 'sandpit_pool_pods', { ...pool, state: 'claimed' }), 0);
    const refills = /^sandpit_pool_refill_seconds_count(?:\{[^}]*\})? (\d+)$/m.exec(metrics);
    assert.ok(refills && Number(refills[1]) >= 2, `refill times observed: ${refills?.[1]}`);

    const get = await cluster.kubectl(['get', 'sbp', '-n', ns, 'sessions']);
    assert.equal(get.code, 0, get.stderr);
    assert.match(get.stdout, /^NAME\s+MODE\s+TEMPLATE\s+DESIRED\s+READY\s+STARTING\s+CLAIMED\s+AGE\n/);
    assert.match(get.stdout, /\nsessions\s+session\s+python\s+2\s+2\s+0\s+0\s+\S+\n$/);

    // kubectl scale goes through /scale (spec.replicas; status.replicas and the selector back).
    const up = await cluster.kubectl(['scale', '-n', ns, 'sbp/sessions', '--replicas=3']);
    assert.equal(up.code, 0, up.stderr);
    await waitForPool(s, 'sessions', isReady(3), 'to have 3 ready pods');
    const scale = await cluster.kubectl(['get', '--raw', `${poolsPath(ns)}/sessions/scale`]);
    assert.equal(scale.code, 0, scale.stderr);
    const body = JSON.parse(scale.stdout) as {
      spec: { replicas: number };
      status: { replicas: number; selector: string };
    };
    assert.deepEqual(body.spec, { replicas: 3 });
    assert.deepEqual(body.status, { replicas: 3, selector: st.selector });
    const down = await cluster.kubectl(['scale', '-n', ns, 'sbp/sessions', '--replicas=1']);
    assert.equal(down.code, 0, down.stderr);
    await waitForPool(s, 'sessions', (p) => isReady(1)(p) && p.status?.replicas === 1, 'to have 1 pod');
    await eventually(
      async () => ((await livePods(cluster, ns, made)).length === 1 ? true : undefined),
      'one pod left after scaling down',
    );
    await eventually(
      async () => (await poolEvents(s, made)).some((e) => e.reason === 'DeletedPod') || undefined,
      'a DeletedPod Event',
    );
  });

  it('a pool pod deleted by hand is replaced', async () => {
    const s = ops.suite;
    const pool = await waitForPool(s, 'sessions', isReady(1), 'ready');
    const [victim] = await livePods(s.cluster, s.ns, pool);
    const name = victim?.metadata?.name ?? '';
    await s.cluster.core.deleteNamespacedPod({ namespace: s.ns, name, gracePeriodSeconds: 0 });
    const fresh = await eventually(async () => {
      const pods = await livePods(s.cluster, s.ns, pool);
      const other = pods.filter((p) => p.metadata?.name !== name);
      return pods.length === 1 && other.length === 1 ? other[0] : undefined;
    }, 'a replacement pod');
    await waitForPool(s, 'sessions', isReady(1), 'ready again');
    assert.notEqual(fresh.metadata?.name, name);
  });

  it('a spec change (memory) replaces the pods with pods of the new shape', async () => {
    const s = ops.suite;
    const pool = await waitForPool(s, 'sessions', isReady(1), 'ready');
    const [old] = await livePods(s.cluster, s.ns, pool);
    const oldShape = old?.metadata?.labels?.['sandpit.dev/pool-shape'];
    await patchPool(s, 'sessions', [
      { op: 'replace', path: '/spec/resources/memory', value: '192Mi' },
      { op: 'replace', path: '/spec/replicas', value: 2 },
    ]);
    await waitForPool(s, 'sessions', isReady(2), 'ready at the new generation');
    const pods = await eventually(async () => {
      const live = await livePods(s.cluster, s.ns, pool);
      return live.length === 2 ? live : undefined;
    }, 'two pods of the new shape');
    for (const pod of pods) {
      assert.notEqual(pod.metadata?.name, old?.metadata?.name);
      assert.notEqual(pod.metadata?.labels?.['sandpit.dev/pool-shape'], oldShape);
      assert.equal(pod.spec?.containers[0]?.resources?.limits?.memory, '192Mi');
    }
  });

  it('a pod relabelled claimed and owned by another (as a claim leaves it) counts as claimed, is replaced and never touched', async () => {
    const s = ops.suite;
    const pool = await waitForPool(s, 'sessions', isReady(2), 'ready');
    const [pod] = await livePods(s.cluster, s.ns, pool);
    const name = pod?.metadata?.name ?? '';
    // What the claim's one PUT changes: the label, and the owner (no longer the pool).
    await s.cluster.core.patchNamespacedPod({
      namespace: s.ns,
      name,
      body: [
        { op: 'replace', path: '/metadata/labels/sandpit.dev~1pool-pod', value: 'claimed' },
        { op: 'remove', path: '/metadata/ownerReferences' },
      ],
    });
    const after = await waitForPool(
      s,
      'sessions',
      (p) => isReady(2)(p) && p.status?.claimedReplicas === 1,
      'to count the claimed pod and refill',
    );
    assert.equal(after.status?.replicas, 2, 'the claimed pod is not one of its replicas');
    const live = await livePods(s.cluster, s.ns, pool);
    assert.equal(live.length, 3);
    assert.ok(
      live.some((p) => p.metadata?.name === name && !p.metadata.deletionTimestamp),
      'left serving',
    );
    await s.cluster.core.deleteNamespacedPod({ namespace: s.ns, name, gracePeriodSeconds: 0 });
    await waitForPool(
      s,
      'sessions',
      (p) => isReady(2)(p) && p.status?.claimedReplicas === 0,
      'to count no claimed pod once it is gone',
    );
  });

  it('a pool the policy refuses has no pods, is Stalled and says why', async () => {
    const s = ops.suite;
    const made = await createPool(s, 'too-big', {
      template: 'python',
      mode: 'session',
      resources: { memory: '8Gi' },
      replicas: 2,
    });
    const stalled = await waitForPool(
      s,
      'too-big',
      (p) => condition(p, 'Stalled')?.status === 'True',
      'to be Stalled',
    );
    assert.match(stalled.status?.message ?? '', /memory/);
    assert.equal(condition(stalled, 'Stalled')?.reason, 'PolicyDenied');
    assert.equal(condition(stalled, 'Ready')?.status, 'False');
    assert.equal(stalled.status?.replicas, 0);
    assert.equal((await livePods(s.cluster, s.ns, made)).length, 0);
    await eventually(
      async () =>
        (await poolEvents(s, made)).some((e) => e.type === 'Warning' && e.reason === 'PolicyDenied') ||
        undefined,
      'a PolicyDenied Event',
    );
  });

  it('a run-mode pool pod is built with stdinOnce and the runner in pool mode', async () => {
    const s = ops.suite;
    const made = await createPool(s, 'runs', {
      template: 'python',
      mode: 'run',
      resources: { cpu: '500m', memory: '192Mi' },
      replicas: 1,
      maxIdleSeconds: 300,
    });
    const [pod] = await eventually(async () => {
      const live = await livePods(s.cluster, s.ns, made);
      return live.length > 0 ? live : undefined;
    }, 'the run pool pod');
    const c = pod!.spec!.containers[0]!;
    assert.deepEqual(c.command?.slice(0, 3), [RUNNER, '--pool', '--preload']);
    assert.equal(c.stdin, true);
    assert.equal(c.stdinOnce, true);
    assert.equal(pod!.spec?.activeDeadlineSeconds, 300 + RUN_TIMEOUT_CEILING_SECONDS + START_GRACE_SECONDS);
    // The same limits as the session pool's pods, another mode: another shape.
    const sessions = await livePods(s.cluster, s.ns, await waitForPool(s, 'sessions', isReady(2), 'ready'));
    assert.notEqual(
      pod!.metadata?.labels?.['sandpit.dev/pool-shape'],
      sessions[0]?.metadata?.labels?.['sandpit.dev/pool-shape'],
    );
    await customApi(s.cluster).deleteNamespacedCustomObject({ ...poolApi, namespace: s.ns, name: 'runs' });
  });

  it('the namespace deny-all policy is restored when edited, and re-created when deleted', async () => {
    const s = ops.suite;
    const before = await readDenyAll(s);
    await networking(s).replaceNamespacedNetworkPolicy({
      namespace: s.ns,
      name: DENY_ALL,
      body: { ...before, spec: { ...before.spec, ingress: [{}], egress: [{}] } },
    });
    await eventually(
      async () => {
        const p = await readDenyAll(s);
        const open = (p.spec?.ingress ?? []).length + (p.spec?.egress ?? []).length;
        return open === 0 && p.metadata?.resourceVersion !== before.metadata?.resourceVersion ? p : undefined;
      },
      'the deny-all policy restored',
      30_000,
    );
    await networking(s).deleteNamespacedNetworkPolicy({ namespace: s.ns, name: DENY_ALL });
    const again = await eventually(
      () => readDenyAll(s).catch(() => undefined),
      'the deny-all policy re-created',
      30_000,
    );
    assert.deepEqual(again.spec?.podSelector?.matchLabels, { 'sandpit.dev/managed-by': 'sandpit-operator' });
  });

  it('deleting the pool removes its idle pods; kubectl apply of the sample makes a pool', async () => {
    const s = ops.suite;
    const pool = await waitForPool(s, 'sessions', isReady(2), 'ready');
    assert.equal((await livePods(s.cluster, s.ns, pool)).length, 2);
    await customApi(s.cluster).deleteNamespacedCustomObject({
      ...poolApi,
      namespace: s.ns,
      name: 'sessions',
    });
    await eventually(
      async () => ((await livePods(s.cluster, s.ns, pool)).length === 0 ? true : undefined),
      'no pod of the deleted pool',
    );
    const sample = path.join(REPO_ROOT, 'deploy/samples/python-pool.yaml');
    const applied = await s.cluster.kubectl(['apply', '--dry-run=server', '-n', s.ns, '-f', sample]);
    assert.equal(applied.code, 0, applied.stderr);
  });
});
