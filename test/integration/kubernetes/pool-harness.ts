// SandboxPools for the tests and the bench: a pool of the very shape the gateway gives a run
// (the limits it writes into the SandboxRun, so the operator's policy reaches the same shape for
// both), waits on its status and its pods, and what one idle pool pod costs in memory, read on
// loopback only (the kubelet's stats/summary through the API server, and the pod's memory cgroup
// on this host).
import { readdirSync, readFileSync } from 'node:fs';
import { CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import {
  LABEL_MANAGED_BY,
  LABEL_POOL,
  LABEL_POOL_POD,
  MANAGED_BY_OPERATOR,
  POOL_POD_IDLE,
  labelValueFor,
} from '../../../src/api/v1alpha1/labels.js';
import {
  SANDBOX_POOL,
  type SandboxPool,
  type SandboxPoolSpecInput,
} from '../../../src/api/v1alpha1/sandboxpool.js';
import { buildSandboxRun } from '../../../src/backends/kubernetes/build-sandbox-run.js';
import type { EffectiveSpec } from '../../../src/policy/evaluate.js';
import type { KubeCluster } from '../../support/kube/index.js';
import { podRunning } from '../../support/kube/wait.js';

const poolApi = { group: SANDBOX_POOL.group, version: SANDBOX_POOL.version, plural: SANDBOX_POOL.plural };

export const poolsPath = (namespace: string): string =>
  `/apis/${SANDBOX_POOL.group}/${SANDBOX_POOL.version}/namespaces/${namespace}/${SANDBOX_POOL.plural}`;

/** The pool spec that serves runs of `spec` as the gateway writes them (template, image, limits, runtime). */
export function poolSpecFor(
  spec: EffectiveSpec,
  o: { replicas: number; maxIdleSeconds?: number },
): SandboxPoolSpecInput {
  const run = buildSandboxRun(spec, {
    runId: 'run-000000000000',
    namespace: 'default',
    principal: 'pool',
    ttlSecondsAfterFinished: 0,
    pendingTimeoutSeconds: 60,
  }).spec;
  return {
    ...(run.template !== undefined ? { template: run.template } : {}),
    ...(run.image !== undefined ? { image: run.image } : {}),
    ...(run.resources ? { resources: run.resources } : {}),
    ...(run.runtimeClassName !== undefined ? { runtimeClassName: run.runtimeClassName } : {}),
    mode: 'run',
    replicas: o.replicas,
    maxIdleSeconds: o.maxIdleSeconds ?? 600,
  };
}

export async function createPool(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  spec: SandboxPoolSpecInput,
): Promise<SandboxPool> {
  const body: SandboxPool = {
    apiVersion: SANDBOX_POOL.apiVersion,
    kind: SANDBOX_POOL.kind,
    metadata: { name },
    spec,
  };
  return (await cluster.kc
    .makeApiClient(CustomObjectsApi)
    .createNamespacedCustomObject({ ...poolApi, namespace, body })) as SandboxPool;
}

export async function deletePool(cluster: KubeCluster, namespace: string, name: string): Promise<void> {
  await cluster.kc
    .makeApiClient(CustomObjectsApi)
    .deleteNamespacedCustomObject({ ...poolApi, namespace, name });
}

/** Waits (by watch on the SandboxPool) until its status says `ready` pods are ready. */
export function waitPoolReady(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  ready: number,
  timeoutMs: number,
): Promise<SandboxPool> {
  return cluster.waitFor<SandboxPool>(
    { path: poolsPath(namespace), name },
    (p) => (p.status?.readyReplicas ?? 0) >= ready,
    { timeoutMs, description: `SandboxPool ${namespace}/${name} to have ${ready} ready pods` },
  );
}

export const isIdlePoolPod =
  (pool: string) =>
  (pod: V1Pod): boolean =>
    pod.metadata?.labels?.[LABEL_POOL] === labelValueFor(pool) &&
    pod.metadata.labels[LABEL_POOL_POD] === POOL_POD_IDLE &&
    !pod.metadata.deletionTimestamp &&
    podRunning(pod) &&
    (pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false);

/** The operator's sandbox pods in `namespace` now (run, session and pool pods). */
export async function sandboxPods(cluster: KubeCluster, namespace: string): Promise<V1Pod[]> {
  return (
    await cluster.core.listNamespacedPod({
      namespace,
      labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY_OPERATOR}`,
    })
  ).items;
}

/**
 * Follows the operator's pods in `namespace` by watch until `done(pods now)` holds; the pods then.
 * Rejects after `timeoutMs` with the pods last seen.
 */
export async function waitPods(
  cluster: KubeCluster,
  namespace: string,
  done: (pods: V1Pod[]) => boolean,
  timeoutMs: number,
  description: string,
): Promise<V1Pod[]> {
  const seen = new Map<string, V1Pod>();
  try {
    await cluster.waitFor<V1Pod>(
      {
        path: `/api/v1/namespaces/${namespace}/pods`,
        labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY_OPERATOR}`,
      },
      (pod, type) => {
        const name = pod.metadata?.name ?? '';
        if (type === 'DELETED') seen.delete(name);
        else seen.set(name, pod);
        return done([...seen.values()]);
      },
      { timeoutMs, description },
    );
    return [...seen.values()];
  } catch (e) {
    // A re-opened watch replays only what exists: the list decides, once, at the end.
    const now = await sandboxPods(cluster, namespace);
    if (done(now)) return now;
    throw e;
  }
}

export interface PodMemory {
  /** The kubelet's stats/summary: the pod's memory.usageBytes (its cgroup's usage). */
  kubelet: number | undefined;
  /** memory.usage_in_bytes of the pod's cgroup on this host (cgroup v1, kubepods hierarchy). */
  cgroup: number | undefined;
}

/** What the pods of `uids` use in memory, each read both ways (undefined where a way has no figure). */
export async function podMemory(
  cluster: KubeCluster,
  uids: readonly string[],
): Promise<Map<string, PodMemory>> {
  const out = new Map<string, PodMemory>(uids.map((u) => [u, { kubelet: undefined, cgroup: undefined }]));
  // The API server proxies to the kubelet, which serves on this machine's loopback.
  const nodes = (await cluster.core.listNode()).items.map((n) => n.metadata?.name ?? '');
  for (const node of nodes) {
    const res = await cluster.kubectl(['get', '--raw', `/api/v1/nodes/${node}/proxy/stats/summary`]);
    if (res.code !== 0) continue;
    const summary = JSON.parse(res.stdout) as {
      pods?: { podRef: { uid: string }; memory?: { usageBytes?: number } }[];
    };
    for (const p of summary.pods ?? []) {
      const m = out.get(p.podRef.uid);
      if (m) m.kubelet = p.memory?.usageBytes;
    }
  }
  const root = '/sys/fs/cgroup/memory/kubepods';
  const dirs = [root, ...['burstable', 'besteffort'].map((q) => `${root}/${q}`)];
  for (const uid of uids) {
    for (const dir of dirs) {
      const podDir = readdirSafe(dir).find((d) => d === `pod${uid}` || d === `pod${uid.replace(/-/g, '_')}`);
      if (!podDir) continue;
      out.get(uid)!.cgroup = Number(readFileSync(`${dir}/${podDir}/memory.usage_in_bytes`, 'utf8'));
      break;
    }
  }
  return out;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
