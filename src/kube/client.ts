/**
 * The thin @kubernetes/client-node adapter the operator uses: exactly the calls it makes, each
 * mapped to a KubeApiError on failure. Objects come back as plain JSON (client-node's typed lists
 * carry Date instances while watch events carry strings; see notes/libraries.md §1.4), so every
 * cache holds one shape.
 */
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  NetworkingV1Api,
  NodeV1Api,
  type CoreV1Event,
  type KubeConfig,
  type V1ConfigMap,
  type V1Lease,
  type V1NetworkPolicy,
  type V1Pod,
  type V1RuntimeClass,
} from '@kubernetes/client-node';
import { SANDBOX_RUN, type SandboxRun } from '../api/v1alpha1/sandboxrun.js';
import { kubeCall } from './errors.js';

/** A stored object as the operator reads it (plain JSON). */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    /** A string in watch events, a Date in typed responses: read it with `new Date(x)`. */
    creationTimestamp?: string | Date;
    deletionTimestamp?: string | Date;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
  };
}

export interface ListPage<T> {
  items: T[];
  resourceVersion: string;
  continueToken: string | undefined;
}

export interface ListQuery {
  namespace: string | undefined;
  labelSelector?: string | undefined;
  continueToken?: string | undefined;
}

const PAGE = 500;

/** Typed models → the JSON the apiserver sent (dates as RFC 3339 strings, no undefined fields). */
function plain<T>(value: unknown): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function page<T>(list: {
  items?: unknown[];
  metadata?: { resourceVersion?: string; _continue?: string };
}): ListPage<T> {
  return {
    items: plain<T[]>(list.items ?? []),
    resourceVersion: list.metadata?.resourceVersion ?? '',
    continueToken: list.metadata?._continue || undefined,
  };
}

export function createKubeClient(kc: KubeConfig) {
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const networking = kc.makeApiClient(NetworkingV1Api);
  const node = kc.makeApiClient(NodeV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const run = { group: SANDBOX_RUN.group, version: SANDBOX_RUN.version, plural: SANDBOX_RUN.plural };
  const paging = (q: ListQuery) => ({
    limit: PAGE,
    _continue: q.continueToken,
    labelSelector: q.labelSelector,
  });

  return {
    kubeConfig: kc,

    listRuns: (q: ListQuery): Promise<ListPage<SandboxRun>> =>
      kubeCall(`list SandboxRuns${q.namespace ? ` in ${q.namespace}` : ''}`, async () => {
        const list = (await (q.namespace
          ? custom.listNamespacedCustomObject({ ...run, namespace: q.namespace, ...paging(q) })
          : custom.listClusterCustomObject({ ...run, ...paging(q) }))) as Parameters<typeof page>[0];
        return page<SandboxRun>(list);
      }),
    listPods: (q: ListQuery): Promise<ListPage<V1Pod>> =>
      kubeCall('list Pods', async () =>
        page<V1Pod>(
          q.namespace
            ? await core.listNamespacedPod({ namespace: q.namespace, ...paging(q) })
            : await core.listPodForAllNamespaces(paging(q)),
        ),
      ),
    listConfigMaps: (q: ListQuery): Promise<ListPage<V1ConfigMap>> =>
      kubeCall('list ConfigMaps', async () =>
        page<V1ConfigMap>(
          q.namespace
            ? await core.listNamespacedConfigMap({ namespace: q.namespace, ...paging(q) })
            : await core.listConfigMapForAllNamespaces(paging(q)),
        ),
      ),
    listNetworkPolicies: (q: ListQuery): Promise<ListPage<V1NetworkPolicy>> =>
      kubeCall('list NetworkPolicies', async () =>
        page<V1NetworkPolicy>(
          q.namespace
            ? await networking.listNamespacedNetworkPolicy({ namespace: q.namespace, ...paging(q) })
            : await networking.listNetworkPolicyForAllNamespaces(paging(q)),
        ),
      ),
    listRuntimeClasses: (q: ListQuery): Promise<ListPage<V1RuntimeClass>> =>
      kubeCall('list RuntimeClasses', async () =>
        page<V1RuntimeClass>(await node.listRuntimeClass(paging(q))),
      ),

    getPod: (namespace: string, name: string): Promise<V1Pod> =>
      kubeCall(`get Pod ${namespace}/${name}`, async () =>
        plain<V1Pod>(await core.readNamespacedPod({ namespace, name })),
      ),
    createPod: (namespace: string, body: V1Pod): Promise<V1Pod> =>
      kubeCall(`create Pod ${namespace}/${body.metadata?.name}`, async () =>
        plain<V1Pod>(await core.createNamespacedPod({ namespace, body })),
      ),
    /**
     * Deletes the pod only if it is still the one with `uid` (never a namesake); grace 0 forces it.
     * Options go in the body: with a body, the apiserver ignores DeleteOptions query parameters.
     */
    deletePod: (namespace: string, name: string, uid: string, gracePeriodSeconds = 1): Promise<void> =>
      kubeCall(`delete Pod ${namespace}/${name}`, async () => {
        await core.deleteNamespacedPod({
          namespace,
          name,
          body: { preconditions: { uid }, gracePeriodSeconds },
        });
      }),
    readPodLog: (
      namespace: string,
      name: string,
      options: { container: string; limitBytes?: number; tailLines?: number },
    ): Promise<string> =>
      kubeCall(`read log of Pod ${namespace}/${name}`, async () =>
        String(await core.readNamespacedPodLog({ namespace, name, ...options })),
      ),

    createConfigMap: (namespace: string, body: V1ConfigMap): Promise<V1ConfigMap> =>
      kubeCall(`create ConfigMap ${namespace}/${body.metadata?.name}`, async () =>
        plain<V1ConfigMap>(await core.createNamespacedConfigMap({ namespace, body })),
      ),
    createNetworkPolicy: (namespace: string, body: V1NetworkPolicy): Promise<V1NetworkPolicy> =>
      kubeCall(`create NetworkPolicy ${namespace}/${body.metadata?.name}`, async () =>
        plain<V1NetworkPolicy>(await networking.createNamespacedNetworkPolicy({ namespace, body })),
      ),
    replaceNetworkPolicy: (namespace: string, body: V1NetworkPolicy): Promise<V1NetworkPolicy> =>
      kubeCall(`update NetworkPolicy ${namespace}/${body.metadata?.name}`, async () =>
        plain<V1NetworkPolicy>(
          await networking.replaceNamespacedNetworkPolicy({
            namespace,
            name: body.metadata?.name ?? '',
            body,
          }),
        ),
      ),

    /** PUT …/status with the object's resourceVersion: a stale write fails with 409 Conflict. */
    replaceRunStatus: (namespace: string, name: string, body: KubeObject): Promise<KubeObject> =>
      kubeCall(`update status of SandboxRun ${namespace}/${name}`, async () =>
        plain<KubeObject>(
          await custom.replaceNamespacedCustomObjectStatus({ ...run, namespace, name, body }),
        ),
      ),
    deleteRun: (namespace: string, name: string, uid: string): Promise<void> =>
      kubeCall(`delete SandboxRun ${namespace}/${name}`, async () => {
        await custom.deleteNamespacedCustomObject({
          ...run,
          namespace,
          name,
          body: { preconditions: { uid }, propagationPolicy: 'Background' },
        });
      }),

    createEvent: (namespace: string, body: CoreV1Event): Promise<void> =>
      kubeCall(`create Event in ${namespace}`, async () => {
        await core.createNamespacedEvent({ namespace, body });
      }),

    getLease: (namespace: string, name: string): Promise<V1Lease> =>
      kubeCall(`get Lease ${namespace}/${name}`, async () =>
        plain<V1Lease>(await coordination.readNamespacedLease({ namespace, name })),
      ),
    createLease: (namespace: string, body: V1Lease): Promise<V1Lease> =>
      kubeCall(`create Lease ${namespace}/${body.metadata?.name}`, async () =>
        plain<V1Lease>(await coordination.createNamespacedLease({ namespace, body })),
      ),
    replaceLease: (namespace: string, body: V1Lease): Promise<V1Lease> =>
      kubeCall(`update Lease ${namespace}/${body.metadata?.name}`, async () =>
        plain<V1Lease>(
          await coordination.replaceNamespacedLease({ namespace, name: body.metadata?.name ?? '', body }),
        ),
      ),
  };
}

export type KubeClient = ReturnType<typeof createKubeClient>;
