/**
 * The calls the gateway makes to the apiserver, exactly those in permissions.ts (plus discovery,
 * /version and SelfSubjectAccessReviews, which every authenticated user may make), all through the
 * one Kubernetes adapter (src/kube). Every failure is mapped once, by gatewayError(), to an error
 * that says what to fix. Getters answer undefined when the object does not exist.
 */
import type { Writable } from 'node:stream';
import { SANDBOX_CONTAINER } from '../../api/v1alpha1/labels.js';
import { SANDBOX_RUN, type SandboxRun } from '../../api/v1alpha1/sandboxrun.js';
import { collectionPath, customPrefix, type KubeClient } from '../../kube/client.js';
import type { ConfigMap, Pod } from '../../kube/objects.js';
import { gatewayError, type CallContext } from './errors.js';
import { followObject, type FollowEnd, type Following } from './follow-object.js';

/** One object of the namespace runs are in. */
export interface ObjectRef {
  namespace: string;
  name: string;
}

export function createRunApi(kube: KubeClient) {
  const { server } = kube;
  const context = (verb: string, resource: string, namespace: string): CallContext => ({
    verb,
    resource,
    namespace,
    server,
  });
  const call = async <T>(ctx: CallContext, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      throw gatewayError(e, ctx);
    }
  };
  const runs = (verb: string, namespace: string): CallContext => context(verb, SANDBOX_RUN.plural, namespace);

  return {
    server,

    createRun: (namespace: string, body: SandboxRun): Promise<SandboxRun> =>
      call(runs('create', namespace), () => kube.createObject(SANDBOX_RUN, namespace, body)),

    /** A ConfigMap in a run's namespace (a run's output files). */
    /** Every SandboxRun in `namespace` that `labelSelector` selects, page by page. */
    listRuns: async (namespace: string, labelSelector: string): Promise<SandboxRun[]> => {
      const items: SandboxRun[] = [];
      let continueToken: string | undefined;
      do {
        const page = await call(runs('list', namespace), () =>
          kube.listObjects<SandboxRun>(SANDBOX_RUN, { namespace, labelSelector, continueToken }),
        );
        items.push(...page.items);
        continueToken = page.continueToken;
      } while (continueToken);
      return items;
    },

    getConfigMap: (ref: ObjectRef): Promise<ConfigMap | undefined> =>
      call(context('get', 'configmaps', ref.namespace), () => kube.getConfigMap(ref.namespace, ref.name)),

    getRun: (ref: ObjectRef): Promise<SandboxRun | undefined> =>
      call(runs('get', ref.namespace), () =>
        kube.getObject<SandboxRun>(SANDBOX_RUN, ref.namespace, ref.name),
      ),

    /** Sets spec.cancel. */
    cancelRun: (ref: ObjectRef): Promise<void> =>
      call(runs('patch', ref.namespace), () =>
        kube.patchObject(SANDBOX_RUN, ref, [{ op: 'add', path: '/spec/cancel', value: true }]),
      ),

    /** Watches one SandboxRun until `onObject` says so, it is deleted, or the signal aborts. */
    followRun: (ref: ObjectRef, following: Following<SandboxRun>): Promise<FollowEnd> =>
      followObject(kube, {
        path: collectionPath(customPrefix(SANDBOX_RUN), SANDBOX_RUN.plural, ref.namespace),
        name: ref.name,
        get: () => kube.getObject<SandboxRun>(SANDBOX_RUN, ref.namespace, ref.name),
        context: runs('watch', ref.namespace),
        ...following,
      }),

    getPod: (ref: ObjectRef): Promise<Pod | undefined> =>
      call(context('get', 'pods', ref.namespace), () => kube.getPod(ref.namespace, ref.name)),

    /** Watches one pod until `onObject` says so, it is deleted, or the signal aborts. */
    followPod: (ref: ObjectRef, following: Following<Pod>): Promise<FollowEnd> =>
      followObject(kube, {
        path: collectionPath('/api/v1', 'pods', ref.namespace),
        name: ref.name,
        get: () => kube.getPod(ref.namespace, ref.name),
        context: context('watch', 'pods', ref.namespace),
        ...following,
      }),

    /**
     * Streams the sandbox container's log into `sink` (ended when the log ends). Rejects with a
     * KubeApiError carrying the HTTP status when the log cannot be read; the caller reports it.
     */
    streamLog: (pod: ObjectRef, sink: Writable, follow: boolean): Promise<AbortController> =>
      kube.streamPodLog({ ...pod, container: SANDBOX_CONTAINER }, sink, follow),

    version: (): Promise<string> => call(context('get', '/version', '-'), () => kube.version()),

    /** The resources the sandpit.dev/v1alpha1 API serves (discovery); empty when the CRD is missing. */
    runApiResources: (): Promise<string[]> =>
      call(context('discover', SANDBOX_RUN.apiVersion, '-'), () =>
        kube.apiResources(SANDBOX_RUN.group, SANDBOX_RUN.version),
      ),

    getLease: (ref: ObjectRef) =>
      call(context('get', 'leases', ref.namespace), () => kube.getLease(ref.namespace, ref.name)),

    /** Whether the gateway's identity may do `verb` on `resource` (a SelfSubjectAccessReview). */
    canI: (q: { namespace: string; verb: string; group: string; resource: string }): Promise<boolean> =>
      call(context('create', 'selfsubjectaccessreviews', q.namespace), () => kube.canI(q)),
  };
}

export type RunApi = ReturnType<typeof createRunApi>;
