/**
 * The thin @kubernetes/client-node adapter: every call the operator and the gateway make, each
 * mapped to a KubeApiError on failure, every object returned as plain JSON (objects.ts). A getter
 * answers undefined when the object does not exist. Which of these calls each side may make is
 * its own permission table (controller/permissions.ts, backends/kubernetes/permissions.ts).
 */
import type { Writable } from 'node:stream';
import {
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  Log,
  NetworkingV1Api,
  NodeV1Api,
  VersionApi,
  Watch,
  type CoreV1Event,
  type KubeConfig,
  type V1ConfigMap,
  type V1Lease,
  type V1NetworkPolicy,
  type V1Pod,
  type V1Secret,
} from '@kubernetes/client-node';
import type { CustomKind } from '../api/v1alpha1/group.js';
import { attachPod, type AttachedPod, type AttachTarget } from './attach.js';
import { keptAlive } from './keep-alive.js';
import {
  kubeCall,
  statusError,
  toKubeError,
  unlessNotFound,
  type KubeApiError,
  type StatusBody,
} from './errors.js';
import {
  plain,
  type ConfigMap,
  type KubeEvent,
  type KubeObject,
  type Lease,
  type NetworkPolicy,
  type Plain,
  type Pod,
  type RuntimeClass,
  type Secret,
  type Service,
} from './objects.js';

export interface ListPage<T> {
  items: T[];
  resourceVersion: string;
  continueToken: string | undefined;
}

export interface ListQuery {
  /** undefined: every namespace. */
  namespace: string | undefined;
  labelSelector?: string | undefined;
  continueToken?: string | undefined;
}

/** A custom resource, as the adapter addresses it (a CustomKind fits). */
export type CustomResource = Pick<CustomKind, 'group' | 'version' | 'plural' | 'kind'>;

/** One RFC 6902 operation (client-node sends custom-object patches as JSON patches). */
export interface JsonPatchOp {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

/** What one watch request is of: a collection path (`/api/v1/namespaces/ns/pods`), optionally narrowed. */
export interface WatchTarget {
  path: string;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';

export interface WatchHandlers<T> {
  onEvent(type: WatchEventType, obj: T): void;
  /** Called once: undefined on a clean close by the server, else the failure (an in-stream ERROR too). */
  onDone(err: KubeApiError | undefined): void;
}

const PAGE = 500;

/** A collection's path: `/api/v1/pods`, `/apis/sandpit.dev/v1alpha1/namespaces/ns/sandboxruns`. */
export function collectionPath(apiPrefix: string, plural: string, namespace: string | undefined): string {
  return `${apiPrefix}${namespace ? `/namespaces/${namespace}` : ''}/${plural}`;
}

export const customPrefix = (r: Pick<CustomResource, 'group' | 'version'>): string =>
  `/apis/${r.group}/${r.version}`;

/** A list response, as far as paging reads it. */
interface List {
  items?: unknown[];
  metadata?: { resourceVersion?: string; _continue?: string };
}

function page<T>(list: List): ListPage<T> {
  return {
    items: plain(list.items ?? []) as T[],
    resourceVersion: list.metadata?.resourceVersion ?? '',
    continueToken: list.metadata?._continue || undefined,
  };
}

/** A plain object handed to client-node: its serializer passes strings through where its models say Date. */
const model = <T>(body: Plain<T>): T => body as unknown as T;

const where = (namespace: string | undefined): string => (namespace ? ` in ${namespace}` : '');

export function createKubeClient(kc: KubeConfig) {
  // Calls, watches and log reads reuse their connections; an attach has its own WebSocket.
  const http = keptAlive(kc);
  const core = http.makeApiClient(CoreV1Api);
  const custom = http.makeApiClient(CustomObjectsApi);
  const networking = http.makeApiClient(NetworkingV1Api);
  const node = http.makeApiClient(NodeV1Api);
  const coordination = http.makeApiClient(CoordinationV1Api);
  const authz = http.makeApiClient(AuthorizationV1Api);
  const versionApi = http.makeApiClient(VersionApi);
  const watcher = new Watch(http);
  const logs = new Log(http);
  const paging = (q: ListQuery) => ({
    limit: PAGE,
    _continue: q.continueToken,
    labelSelector: q.labelSelector,
  });
  /** One page of a namespaced resource: in `q.namespace`, or in every namespace. */
  const listPages = <T>(
    what: string,
    q: ListQuery,
    calls: {
      namespaced(o: ReturnType<typeof paging> & { namespace: string }): Promise<List>;
      all(o: ReturnType<typeof paging>): Promise<List>;
    },
  ): Promise<ListPage<T>> =>
    kubeCall(`list ${what}${where(q.namespace)}`, async () =>
      page<T>(
        q.namespace
          ? await calls.namespaced({ namespace: q.namespace, ...paging(q) })
          : await calls.all(paging(q)),
      ),
    );
  const res = (r: CustomResource) => ({ group: r.group, version: r.version, plural: r.plural });

  return {
    /** The apiserver's URL, for messages. */
    server: kc.getCurrentCluster()?.server ?? '(no server)',

    // Custom resources (SandboxRun and the kinds after it). The caller types the object it reads.
    listObjects: <T extends KubeObject>(r: CustomResource, q: ListQuery): Promise<ListPage<T>> =>
      kubeCall(`list ${r.kind}s${where(q.namespace)}`, async () =>
        page<T>(
          (await (q.namespace
            ? custom.listNamespacedCustomObject({ ...res(r), namespace: q.namespace, ...paging(q) })
            : custom.listClusterCustomObject({ ...res(r), ...paging(q) }))) as List,
        ),
      ),
    getObject: <T extends KubeObject>(r: CustomResource, namespace: string, name: string) =>
      unlessNotFound(
        kubeCall(
          `get ${r.kind} ${namespace}/${name}`,
          async () => plain(await custom.getNamespacedCustomObject({ ...res(r), namespace, name })) as T,
        ),
      ),
    createObject: <T extends KubeObject>(r: CustomResource, namespace: string, body: T): Promise<T> =>
      kubeCall(
        `create ${r.kind} ${namespace}/${body.metadata?.name}`,
        async () => plain(await custom.createNamespacedCustomObject({ ...res(r), namespace, body })) as T,
      ),
    patchObject: (r: CustomResource, ref: { namespace: string; name: string }, ops: JsonPatchOp[]) =>
      kubeCall(`patch ${r.kind} ${ref.namespace}/${ref.name}`, async () => {
        await custom.patchNamespacedCustomObject({ ...res(r), ...ref, body: ops });
      }),
    /** PUT …/status with the object's resourceVersion: a stale write fails with 409 Conflict. */
    replaceObjectStatus: <T extends KubeObject>(r: CustomResource, body: T): Promise<T> => {
      const { namespace = '', name = '' } = body.metadata ?? {};
      return kubeCall(
        `update status of ${r.kind} ${namespace}/${name}`,
        async () =>
          plain(await custom.replaceNamespacedCustomObjectStatus({ ...res(r), namespace, name, body })) as T,
      );
    },
    /** Deletes the object only if it is still the one with `uid`; its children go in the background. */
    deleteObject: (r: CustomResource, ref: { namespace: string; name: string; uid: string }) =>
      kubeCall(`delete ${r.kind} ${ref.namespace}/${ref.name}`, async () => {
        await custom.deleteNamespacedCustomObject({
          ...res(r),
          namespace: ref.namespace,
          name: ref.name,
          body: { preconditions: { uid: ref.uid }, propagationPolicy: 'Background' },
        });
      }),

    listPods: (q: ListQuery): Promise<ListPage<Pod>> =>
      listPages<Pod>('Pods', q, {
        namespaced: (o) => core.listNamespacedPod(o),
        all: (o) => core.listPodForAllNamespaces(o),
      }),
    getPod: (namespace: string, name: string): Promise<Pod | undefined> =>
      unlessNotFound(
        kubeCall(`get Pod ${namespace}/${name}`, async () =>
          plain(await core.readNamespacedPod({ namespace, name })),
        ),
      ),
    createPod: (namespace: string, body: Pod): Promise<Pod> =>
      kubeCall(`create Pod ${namespace}/${body.metadata?.name}`, async () =>
        plain(await core.createNamespacedPod({ namespace, body: model<V1Pod>(body) })),
      ),
    /** Replaces the pod (PUT with its resourceVersion: a stale copy fails with Conflict). */
    replacePod: (namespace: string, body: Pod): Promise<Pod> =>
      kubeCall(`replace Pod ${namespace}/${body.metadata?.name}`, async () =>
        plain(
          await core.replaceNamespacedPod({
            namespace,
            name: body.metadata?.name ?? '',
            body: model<V1Pod>(body),
          }),
        ),
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
    /**
     * Deletes the pod only if it is still the one with `uid` at `resourceVersion`: a pod changed
     * since (claimed, relabelled) is left alone, with a Conflict.
     */
    deletePodIfUnchanged: (
      namespace: string,
      pod: { name: string; uid: string; resourceVersion: string },
    ): Promise<void> =>
      kubeCall(`delete Pod ${namespace}/${pod.name}`, async () => {
        await core.deleteNamespacedPod({
          namespace,
          name: pod.name,
          body: {
            preconditions: { uid: pod.uid, resourceVersion: pod.resourceVersion },
            gracePeriodSeconds: 1,
          },
        });
      }),
    /** One read of a container's log (pods/log). */
    readPodLog: (
      pod: { namespace: string; name: string },
      options: { container: string; limitBytes?: number; tailLines?: number },
    ): Promise<string> =>
      kubeCall(`read log of Pod ${pod.namespace}/${pod.name}`, async () =>
        String(await core.readNamespacedPodLog({ ...pod, ...options })),
      ),
    /**
     * Streams a container's log into `sink` (ended when the log ends); followed while it runs when
     * `follow`. Rejects with the HTTP status when the log cannot be read (client-node drops the
     * server's message). Aborting the controller it gives stops the stream.
     */
    streamPodLog: (
      pod: { namespace: string; name: string; container: string },
      sink: Writable,
      follow: boolean,
    ): Promise<AbortController> =>
      kubeCall(`read log of Pod ${pod.namespace}/${pod.name}`, () =>
        logs.log(pod.namespace, pod.name, pod.container, sink, { follow, timestamps: false }),
      ),

    listConfigMaps: (q: ListQuery): Promise<ListPage<ConfigMap>> =>
      listPages<ConfigMap>('ConfigMaps', q, {
        namespaced: (o) => core.listNamespacedConfigMap(o),
        all: (o) => core.listConfigMapForAllNamespaces(o),
      }),
    createConfigMap: (namespace: string, body: ConfigMap): Promise<ConfigMap> =>
      kubeCall(`create ConfigMap ${namespace}/${body.metadata?.name}`, async () =>
        plain(await core.createNamespacedConfigMap({ namespace, body: model<V1ConfigMap>(body) })),
      ),
    getConfigMap: (namespace: string, name: string): Promise<ConfigMap | undefined> =>
      unlessNotFound(
        kubeCall(`get ConfigMap ${namespace}/${name}`, async () =>
          plain(await core.readNamespacedConfigMap({ namespace, name })),
        ),
      ),

    createSecret: (namespace: string, body: Secret): Promise<Secret> =>
      kubeCall(`create Secret ${namespace}/${body.metadata?.name}`, async () =>
        plain(await core.createNamespacedSecret({ namespace, body: model<V1Secret>(body) })),
      ),
    getSecret: (namespace: string, name: string): Promise<Secret | undefined> =>
      unlessNotFound(
        kubeCall(`get Secret ${namespace}/${name}`, async () =>
          plain(await core.readNamespacedSecret({ namespace, name })),
        ),
      ),
    getService: (namespace: string, name: string): Promise<Service | undefined> =>
      unlessNotFound(
        kubeCall(`get Service ${namespace}/${name}`, async () =>
          plain(await core.readNamespacedService({ namespace, name })),
        ),
      ),

    listNetworkPolicies: (q: ListQuery): Promise<ListPage<NetworkPolicy>> =>
      listPages<NetworkPolicy>('NetworkPolicies', q, {
        namespaced: (o) => networking.listNamespacedNetworkPolicy(o),
        all: (o) => networking.listNetworkPolicyForAllNamespaces(o),
      }),
    createNetworkPolicy: (namespace: string, body: NetworkPolicy): Promise<NetworkPolicy> =>
      kubeCall(`create NetworkPolicy ${namespace}/${body.metadata?.name}`, async () =>
        plain(
          await networking.createNamespacedNetworkPolicy({ namespace, body: model<V1NetworkPolicy>(body) }),
        ),
      ),
    getNetworkPolicy: (namespace: string, name: string): Promise<NetworkPolicy | undefined> =>
      unlessNotFound(
        kubeCall(`get NetworkPolicy ${namespace}/${name}`, async () =>
          plain(await networking.readNamespacedNetworkPolicy({ namespace, name })),
        ),
      ),
    replaceNetworkPolicy: (namespace: string, body: NetworkPolicy): Promise<NetworkPolicy> =>
      kubeCall(`update NetworkPolicy ${namespace}/${body.metadata?.name}`, async () =>
        plain(
          await networking.replaceNamespacedNetworkPolicy({
            namespace,
            name: body.metadata?.name ?? '',
            body: model<V1NetworkPolicy>(body),
          }),
        ),
      ),

    listRuntimeClasses: (q: ListQuery): Promise<ListPage<RuntimeClass>> =>
      kubeCall('list RuntimeClasses', async () => page<RuntimeClass>(await node.listRuntimeClass(paging(q)))),

    /** Events in `namespace` matching a field selector (one page: callers select narrowly). */
    listEvents: (namespace: string, fieldSelector: string): Promise<KubeEvent[]> =>
      kubeCall(`list Events in ${namespace}`, async () =>
        plain((await core.listNamespacedEvent({ namespace, fieldSelector, limit: PAGE })).items),
      ),
    createEvent: (namespace: string, body: KubeEvent): Promise<void> =>
      kubeCall(`create Event in ${namespace}`, async () => {
        await core.createNamespacedEvent({ namespace, body: model<CoreV1Event>(body) });
      }),

    listLeases: (q: ListQuery): Promise<ListPage<Lease>> =>
      listPages<Lease>('Leases', q, {
        namespaced: (o) => coordination.listNamespacedLease(o),
        all: (o) => coordination.listLeaseForAllNamespaces(o),
      }),
    getLease: (namespace: string, name: string): Promise<Lease | undefined> =>
      unlessNotFound(
        kubeCall(`get Lease ${namespace}/${name}`, async () =>
          plain(await coordination.readNamespacedLease({ namespace, name })),
        ),
      ),
    createLease: (namespace: string, body: Lease): Promise<Lease> =>
      kubeCall(`create Lease ${namespace}/${body.metadata?.name}`, async () =>
        plain(await coordination.createNamespacedLease({ namespace, body: model<V1Lease>(body) })),
      ),
    replaceLease: (namespace: string, body: Lease): Promise<Lease> =>
      kubeCall(`update Lease ${namespace}/${body.metadata?.name}`, async () =>
        plain(
          await coordination.replaceNamespacedLease({
            namespace,
            name: body.metadata?.name ?? '',
            body: model<V1Lease>(body),
          }),
        ),
      ),

    /** A byte channel to a running container's stdin and stdout, and stderr when asked (pods/attach; see attach.ts). */
    attach: (
      target: AttachTarget,
      onStdout: (data: Buffer) => void,
      onStderr?: (data: Buffer) => void,
    ): Promise<AttachedPod> => attachPod(kc, target, onStdout, onStderr),

    /** The apiserver's version (`v1.20.2`). */
    version: (): Promise<string> =>
      kubeCall('get /version', async () => (await versionApi.getCode()).gitVersion),
    /** The resources a group version serves (discovery); empty when it is not served. */
    apiResources: async (group: string, version: string): Promise<string[]> =>
      (await unlessNotFound(
        kubeCall(`discover ${group}/${version}`, async () =>
          (await custom.getAPIResources({ group, version })).resources.map((r) => r.name),
        ),
      )) ?? [],
    /** Whether the caller may do `verb` on `resource` (`pods/log` names a subresource): a SelfSubjectAccessReview. */
    canI: (q: { namespace: string; verb: string; group: string; resource: string }): Promise<boolean> =>
      kubeCall(`create SelfSubjectAccessReview in ${q.namespace}`, async () => {
        const [resource, subresource] = q.resource.split('/');
        const review = await authz.createSelfSubjectAccessReview({
          body: {
            spec: {
              resourceAttributes: {
                namespace: q.namespace,
                verb: q.verb,
                group: q.group,
                resource,
                ...(subresource ? { subresource } : {}),
              },
            },
          },
        });
        return review.status?.allowed === true;
      }),

    /**
     * Opens one watch (bookmarks on). Events arrive as plain JSON; an in-stream ERROR ends it with
     * its status as a KubeApiError. watch.ts keeps a watch going; call this only through it.
     */
    watch: <T extends KubeObject>(
      target: WatchTarget,
      query: { resourceVersion: string | undefined; timeoutSeconds: number },
      handlers: WatchHandlers<T>,
    ): Promise<AbortController> => {
      const what = `watch ${target.path}`;
      let done = false;
      const end = (err: KubeApiError | undefined): void => {
        if (done) return;
        done = true;
        handlers.onDone(err);
      };
      return kubeCall(what, () =>
        watcher.watch(
          target.path,
          {
            allowWatchBookmarks: true,
            timeoutSeconds: query.timeoutSeconds,
            resourceVersion: query.resourceVersion,
            labelSelector: target.labelSelector,
            fieldSelector: target.fieldSelector,
          },
          (type: string, obj: T & StatusBody) => {
            if (done) return;
            if (type === 'ERROR') end(statusError(obj, what));
            else handlers.onEvent(type as WatchEventType, obj);
          },
          (err: unknown) => end(err ? toKubeError(err, what) : undefined),
        ),
      );
    },
  };
}

export type KubeClient = ReturnType<typeof createKubeClient>;
