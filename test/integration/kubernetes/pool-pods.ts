// Pool pods made by the test itself, as the SandboxPool controller makes them (contract §1): the
// hardened sandbox pod of a run's effective shape (the test operator's own policy and pod
// settings), running `sandpit-runner --pool` on its attached stdin (stdinOnce), labelled idle with
// the shape label, controlled by a SandboxPool object the test creates.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { RunRequestSchema, type RunRequestInput } from '../../../src/api/run.js';
import { LABEL_POOL_POD, LABEL_POOL_UID, POOL_POD_IDLE } from '../../../src/api/v1alpha1/labels.js';
import { loadConfig } from '../../../src/config/load.js';
import { operatorPolicy } from '../../../src/config/policy.js';
import type { PodSettings } from '../../../src/controller/pod/build-sandbox-pod.js';
import { buildPoolPod } from '../../../src/controller/sandboxpool/build-pool-pod.js';
import { poolRef } from '../../../src/controller/sandboxpool/pool-ref.js';
import { poolShapeLabel } from '../../../src/controller/sandboxpool/evaluate-pool.js';
import type { Pod } from '../../../src/kube/objects.js';
import { evaluate } from '../../../src/policy/evaluate.js';
import type { KubeCluster } from '../../support/kube/index.js';
import { operatorConfig } from './operator-harness.js';

const poolApi = { group: 'sandpit.dev', version: 'v1alpha1', plural: 'sandboxpools' };

export interface TestPool {
  name: string;
  uid: string;
}

/**
 * A SandboxPool of the default python shape. With an operator running, its controller keeps
 * `replicas` ready pods (scalePool); before one runs, the test may make those pods itself
 * (createPoolPods), and the controller then finds what it wants.
 */
export async function createPool(
  cluster: KubeCluster,
  ns: string,
  name: string,
  replicas = 0,
): Promise<TestPool> {
  const created = (await cluster.kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...poolApi,
    namespace: ns,
    body: {
      apiVersion: 'sandpit.dev/v1alpha1',
      kind: 'SandboxPool',
      metadata: { name },
      spec: { template: 'python', replicas },
    },
  })) as { metadata: { uid: string } };
  return { name, uid: created.metadata.uid };
}

/** The test operator's policy and pod settings, read from the config it starts with. */
function operatorSide(ns: string): { settings: PodSettings; config: ReturnType<typeof loadConfig> } {
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-pool-config-'));
  try {
    const file = path.join(dir, 'config.yaml');
    writeFileSync(file, stringify(operatorConfig({ namespace: ns })));
    const config = loadConfig({ configPath: file });
    const k = config.kubernetes.operator;
    return {
      config,
      settings: {
        imagePullPolicy: k.imagePullPolicy,
        cpuRequestMilli: k.cpuRequest,
        memoryRequestBytes: k.memoryRequest,
        startGraceSeconds: k.startGraceSeconds,
        seccomp: { profile: k.seccompProfile, gvisorRuntimeClasses: k.gvisorRuntimeClasses },
      },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A pool pod serving runs of `request`'s shape: the one the pool controller builds (buildPoolPod). */
export function poolPod(ns: string, pool: TestPool, request: RunRequestInput): Pod {
  const { config, settings } = operatorSide(ns);
  const policy = operatorPolicy(config);
  const evaluation = evaluate(RunRequestSchema.parse(request), policy);
  assert.ok(evaluation.ok, JSON.stringify(evaluation));
  const effective = evaluation.spec;
  return buildPoolPod(
    poolRef({ name: pool.name, namespace: ns, uid: pool.uid }),
    { mode: 'run', maxIdleSeconds: 600, effective, shapeLabel: poolShapeLabel(effective, 'run') },
    { settings, ceilings: policy, requireNoNetwork: false },
  );
}

/** Creates `n` pool pods and waits until each is Ready; returns their names. */
export async function createPoolPods(
  cluster: KubeCluster,
  ns: string,
  pool: TestPool,
  request: RunRequestInput,
  n: number,
): Promise<string[]> {
  const body = poolPod(ns, pool, request) as V1Pod;
  const names: string[] = [];
  for (let i = 0; i < n; i++) {
    const created = await cluster.core.createNamespacedPod({ namespace: ns, body });
    names.push(created.metadata?.name ?? '');
  }
  for (const name of names) {
    await cluster.waitFor<V1Pod>(
      { path: `/api/v1/namespaces/${ns}/pods`, name },
      (p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true,
      { timeoutMs: 90_000, description: `pool pod ${ns}/${name} to be Ready` },
    );
  }
  return names;
}

const isReady = (p: V1Pod): boolean =>
  !p.metadata?.deletionTimestamp &&
  p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** Sets the pool's replicas and waits for that many ready idle pods; their names, oldest first. */
export async function scalePool(
  cluster: KubeCluster,
  ns: string,
  pool: TestPool,
  n: number,
): Promise<string[]> {
  await cluster.kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({
    ...poolApi,
    namespace: ns,
    name: pool.name,
    body: [{ op: 'replace', path: '/spec/replicas', value: n }],
  });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { items } = await cluster.core.listNamespacedPod({
      namespace: ns,
      labelSelector: `${LABEL_POOL_UID}=${pool.uid},${LABEL_POOL_POD}=${POOL_POD_IDLE}`,
    });
    const ready = items
      .filter(isReady)
      .sort((a, b) =>
        String(a.metadata?.creationTimestamp).localeCompare(String(b.metadata?.creationTimestamp)),
      );
    if (ready.length === n && items.length === n) return ready.map((p) => p.metadata?.name ?? '');
    if (Date.now() > deadline) throw new Error(`pool ${ns}/${pool.name}: ${ready.length} of ${n} pods ready`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
