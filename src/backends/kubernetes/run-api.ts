/**
 * The calls the gateway makes to the apiserver, exactly those in permissions.ts (plus discovery,
 * /version and SelfSubjectAccessReviews, which every authenticated user may make). Every failure
 * is mapped once, by gatewayError(), to an error that says what to fix. Objects come back as plain
 * JSON.
 */
import type { Writable } from 'node:stream';
import {
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  Log,
  VersionApi,
  Watch,
  type KubeConfig,
  type V1Lease,
  type V1Pod,
} from '@kubernetes/client-node';
import { SANDBOX_RUN, type SandboxRun } from '../../api/v1alpha1/sandboxrun.js';
import { gatewayError, type CallContext } from './errors.js';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchHandlers<T> {
  onEvent(type: WatchEventType, obj: T): void;
  /** Called once: on a clean close (`undefined`) or a failure. */
  onDone(err: unknown): void;
}

export const SANDBOX_CONTAINER = 'sandbox';

const plain = <T>(value: unknown): T => JSON.parse(JSON.stringify(value)) as T;

export function createRunApi(kc: KubeConfig) {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const authz = kc.makeApiClient(AuthorizationV1Api);
  const versionApi = kc.makeApiClient(VersionApi);
  const watcher = new Watch(kc);
  const logs = new Log(kc);
  const server = kc.getCurrentCluster()?.server ?? '(no server)';
  const { group: GROUP, version: VERSION, plural: PLURAL } = SANDBOX_RUN;
  const run = { group: GROUP, version: VERSION, plural: PLURAL };

  const call = async <T>(ctx: Omit<CallContext, 'server'>, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      throw gatewayError(e, { ...ctx, server });
    }
  };
  const watchPath = (namespace: string, plural: string, prefix: string): string =>
    `${prefix}/namespaces/${namespace}/${plural}`;
  const watchOne = async <T>(
    path: string,
    name: string,
    resourceVersion: string | undefined,
    timeoutSeconds: number,
    handlers: WatchHandlers<T>,
  ): Promise<AbortController> =>
    watcher.watch(
      path,
      {
        fieldSelector: `metadata.name=${name}`,
        allowWatchBookmarks: true,
        timeoutSeconds,
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      (type: string, obj: T) => handlers.onEvent(type as WatchEventType, obj),
      (err: unknown) => handlers.onDone(err ?? undefined),
    );

  return {
    server,

    createRun: (namespace: string, body: SandboxRun): Promise<SandboxRun> =>
      call({ verb: 'create', resource: PLURAL, namespace }, async () =>
        plain<SandboxRun>(await custom.createNamespacedCustomObject({ ...run, namespace, body })),
      ),

    getRun: (namespace: string, name: string): Promise<SandboxRun> =>
      call({ verb: 'get', resource: PLURAL, namespace }, async () =>
        plain<SandboxRun>(await custom.getNamespacedCustomObject({ ...run, namespace, name })),
      ),

    /** Sets spec.cancel (a JSON patch: client-node's default patch type). */
    cancelRun: (namespace: string, name: string): Promise<void> =>
      call({ verb: 'patch', resource: PLURAL, namespace }, async () => {
        await custom.patchNamespacedCustomObject({
          ...run,
          namespace,
          name,
          body: [{ op: 'add', path: '/spec/cancel', value: true }],
        });
      }),

    /** Watches one SandboxRun by name from `resourceVersion`; failures reach `onDone` unmapped. */
    watchRun: (
      namespace: string,
      name: string,
      resourceVersion: string | undefined,
      timeoutSeconds: number,
      handlers: WatchHandlers<SandboxRun>,
    ): Promise<AbortController> =>
      watchOne(
        watchPath(namespace, PLURAL, `/apis/${GROUP}/${VERSION}`),
        name,
        resourceVersion,
        timeoutSeconds,
        handlers,
      ),

    /** The pod, or undefined when it does not exist. */
    getPod: (namespace: string, name: string): Promise<V1Pod | undefined> =>
      call({ verb: 'get', resource: 'pods', namespace }, async () => {
        try {
          return plain<V1Pod>(await core.readNamespacedPod({ namespace, name }));
        } catch (e) {
          if ((e as { code?: unknown }).code === 404) return undefined;
          throw e;
        }
      }),

    watchPod: (
      namespace: string,
      name: string,
      resourceVersion: string | undefined,
      timeoutSeconds: number,
      handlers: WatchHandlers<V1Pod>,
    ): Promise<AbortController> =>
      watchOne(watchPath(namespace, 'pods', '/api/v1'), name, resourceVersion, timeoutSeconds, handlers),

    /**
     * Streams the sandbox container's log into `sink` (ended when the log ends). Rejects with the
     * HTTP status when the log cannot be read (client-node drops the server's message).
     */
    streamLog: (namespace: string, pod: string, sink: Writable, follow: boolean): Promise<AbortController> =>
      logs.log(namespace, pod, SANDBOX_CONTAINER, sink, { follow, timestamps: false }),

    version: (): Promise<string> =>
      call({ verb: 'get', resource: '/version', namespace: '-' }, async () => {
        const v = await versionApi.getCode();
        return v.gitVersion;
      }),

    /** The resources the sandpit.dev/v1alpha1 API serves (discovery); empty when the CRD is missing. */
    runApiResources: (): Promise<string[]> =>
      call({ verb: 'discover', resource: `${GROUP}/${VERSION}`, namespace: '-' }, async () => {
        try {
          const list = await custom.getAPIResources({ group: GROUP, version: VERSION });
          return list.resources.map((r) => r.name);
        } catch (e) {
          if ((e as { code?: unknown }).code === 404) return [];
          throw e;
        }
      }),

    getLease: (namespace: string, name: string): Promise<V1Lease | undefined> =>
      call({ verb: 'get', resource: 'leases', namespace }, async () => {
        try {
          return plain<V1Lease>(await coordination.readNamespacedLease({ namespace, name }));
        } catch (e) {
          if ((e as { code?: unknown }).code === 404) return undefined;
          throw e;
        }
      }),

    /** Whether the gateway's identity may do `verb` on `resource` (a SelfSubjectAccessReview). */
    canI: (namespace: string, verb: string, group: string, resource: string): Promise<boolean> =>
      call({ verb: 'create', resource: 'selfsubjectaccessreviews', namespace }, async () => {
        const [res, subresource] = resource.split('/');
        const review = await authz.createSelfSubjectAccessReview({
          body: {
            spec: {
              resourceAttributes: {
                namespace,
                verb,
                group,
                resource: res,
                ...(subresource ? { subresource } : {}),
              },
            },
          },
        });
        return review.status?.allowed === true;
      }),
  };
}

export type RunApi = ReturnType<typeof createRunApi>;
