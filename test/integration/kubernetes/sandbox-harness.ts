// Sandboxes on the real cluster for the operator tests: create, read, patch and wait on them
// (through watches), as an admin client would; the operator under test runs with its own identity.
import type { V1Pod } from '@kubernetes/client-node';
import type { Sandbox, SandboxSpecInput } from '../../../src/api/v1alpha1/sandbox.js';
import { isNotFound, type KubeCluster } from '../../support/kube/index.js';
import { customApi } from './operator-harness.js';

const sandboxApi = { group: 'sandpit.dev', version: 'v1alpha1', plural: 'sandboxes' };

export const sandboxesPath = (namespace: string): string =>
  `/apis/sandpit.dev/v1alpha1/namespaces/${namespace}/sandboxes`;

export function sandbox(name: string, spec: SandboxSpecInput): Sandbox {
  return { apiVersion: 'sandpit.dev/v1alpha1', kind: 'Sandbox', metadata: { name }, spec };
}

export async function createSandbox(
  cluster: KubeCluster,
  namespace: string,
  body: Sandbox,
): Promise<Sandbox> {
  return (await customApi(cluster).createNamespacedCustomObject({
    ...sandboxApi,
    namespace,
    body,
  })) as Sandbox;
}

export async function getSandbox(
  cluster: KubeCluster,
  namespace: string,
  name: string,
): Promise<Sandbox | undefined> {
  try {
    return (await customApi(cluster).getNamespacedCustomObject({
      ...sandboxApi,
      namespace,
      name,
    })) as Sandbox;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** Sets spec.cancel (a JSON patch). */
export async function cancelSandbox(cluster: KubeCluster, namespace: string, name: string): Promise<void> {
  await customApi(cluster).patchNamespacedCustomObject({
    ...sandboxApi,
    namespace,
    name,
    body: [{ op: 'add', path: '/spec/cancel', value: true }],
  });
}

/** What `kubectl patch sbx … -p '{"spec":{"ttlSeconds":N}}'` does (and the gateway's extension). */
export async function setSandboxTtl(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  ttlSeconds: number,
): Promise<void> {
  await customApi(cluster).patchNamespacedCustomObject({
    ...sandboxApi,
    namespace,
    name,
    body: [{ op: 'replace', path: '/spec/ttlSeconds', value: ttlSeconds }],
  });
}

/** Waits (by watch) for the Sandbox to satisfy `pred`; returns it. */
export function waitForSandbox(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  pred: (s: Sandbox) => boolean,
  what: string,
  timeoutMs = 90_000,
): Promise<Sandbox> {
  return cluster.waitFor<Sandbox>({ path: sandboxesPath(namespace), name }, (s) => pred(s), {
    timeoutMs,
    description: `Sandbox ${namespace}/${name} ${what}`,
  });
}

export const isReady = (s: Sandbox): boolean =>
  s.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

const ENDED = new Set(['Expired', 'Deleted', 'Failed']);
export const hasEnded = (s: Sandbox): boolean => ENDED.has(s.status?.phase ?? '');

export function waitForReady(cluster: KubeCluster, namespace: string, name: string): Promise<Sandbox> {
  return waitForSandbox(cluster, namespace, name, (s) => isReady(s) || hasEnded(s), 'to be Ready');
}

export function waitForEnd(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  timeoutMs = 90_000,
): Promise<Sandbox> {
  return waitForSandbox(cluster, namespace, name, hasEnded, 'to end', timeoutMs);
}

/** The pods of a Sandbox, found by its session-uid label. */
export async function sessionPods(cluster: KubeCluster, namespace: string, s: Sandbox): Promise<V1Pod[]> {
  const uid = s.metadata?.uid ?? '';
  return (
    await cluster.core.listNamespacedPod({ namespace, labelSelector: `sandpit.dev/session-uid=${uid}` })
  ).items;
}

/** Waits until no pod of the Sandbox is left (deleted, and gone from the API). */
export async function waitNoPods(
  cluster: KubeCluster,
  namespace: string,
  s: Sandbox,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = await sessionPods(cluster, namespace, s);
    if (left.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(
        `pods of Sandbox ${s.metadata?.name} still there: ${left.map((p) => p.metadata?.name ?? '?').join(', ')}`,
      );
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Seconds from the Sandbox's creation to `time`, by the cluster's clocks. */
export const secondsSinceCreation = (s: Sandbox, time: string | undefined): number =>
  (Date.parse(time ?? '') - Date.parse(s.metadata?.creationTimestamp ?? '')) / 1000;
