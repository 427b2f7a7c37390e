// The operator's side of a session, played by the test until the Sandbox controller
// (src/controller/sandbox/) lands: for each Sandbox in a namespace it makes the session pod the
// decisions in briefs/15-shared.md describe (buildSandboxPod(), `sandpit-runner --session
// --open-within`, stdin true and stdinOnce false, the Sandbox as its controller), waits for the
// runner's 9-byte ready frame at the start of the pod's log, and writes the status Ready with the
// pod's name in one resourceVersion-guarded PUT. It runs as admin: it stands in for the operator,
// while the gateway under test keeps its own RBAC identity.
import { CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import {
  LABEL_MANAGED_BY,
  LABEL_SESSION,
  MANAGED_BY_OPERATOR,
  labelValueFor,
} from '../../../src/api/v1alpha1/labels.js';
import { SANDBOX, type Sandbox, type SandboxStatus } from '../../../src/api/v1alpha1/sandbox.js';
import { buildSandboxPod, type PodSettings } from '../../../src/controller/pod/build-sandbox-pod.js';
import { sessionPolicy, sessionSpec } from '../../support/sessions.js';
import type { KubeCluster } from '../../support/kube/index.js';

export const POD_SETTINGS: PodSettings = {
  imagePullPolicy: 'IfNotPresent',
  cpuRequestMilli: 10,
  memoryRequestBytes: 32 * 1024 ** 2,
  startGraceSeconds: 15,
  seccomp: { profile: 'Localhost', gvisorRuntimeClasses: ['gvisor'] },
};

const api = { group: SANDBOX.group, version: SANDBOX.version, plural: SANDBOX.plural };

/** The session pod of a Sandbox, as the operator makes it; `override` changes it (e.g. a foreign pod). */
export function sessionPod(sandbox: Sandbox, override: { name?: string; owned?: boolean } = {}): V1Pod {
  const name = sandbox.metadata.name ?? '';
  const s = sandbox.spec;
  const spec = sessionSpec(
    {
      ...(s.template ? { template: s.template } : {}),
      ...(s.image ? { image: s.image } : {}),
      ...(s.resources ? { resources: s.resources } : {}),
      ttlSeconds: s.ttlSeconds,
    },
    sessionPolicy(),
  );
  const pod = buildSandboxPod({
    meta: {
      name: override.name ?? `${name}-pod`,
      namespace: sandbox.metadata.namespace,
      labels: { [LABEL_SESSION]: labelValueFor(name), [LABEL_MANAGED_BY]: MANAGED_BY_OPERATOR },
      ...(override.owned === false
        ? {}
        : {
            ownerReferences: [
              {
                apiVersion: SANDBOX.apiVersion,
                kind: SANDBOX.kind,
                name,
                uid: sandbox.metadata.uid ?? '',
                controller: true,
                blockOwnerDeletion: true,
              },
            ],
          }),
    },
    spec: spec,
    settings: POD_SETTINGS,
    program: { command: ['sandpit-runner', '--session', '--open-within', String(spec.ttlSeconds)] },
    activeDeadlineSeconds: spec.ttlSeconds + POD_SETTINGS.startGraceSeconds,
  });
  const container = pod.spec?.containers[0];
  if (container) Object.assign(container, { stdin: true, stdinOnce: false, tty: false });
  return pod as unknown as V1Pod;
}

/**
 * Waits for the pod's container to run. The operator is to wait for the runner's 9-byte ready frame
 * at the head of the pod's log as well; on this cluster's containerd that frame (no newline) stays
 * in the CRI log writer's line buffer until the runner writes a newline, so the stand-in does not
 * wait for it: the gateway opens without it anyway (its attach starts after the frame was written).
 */
export async function waitRunnerReady(
  cluster: KubeCluster,
  namespace: string,
  pod: string,
  timeoutMs = 120_000,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const p = await cluster.core.readNamespacedPod({ namespace, name: pod }).catch(() => undefined);
    if (p?.status?.phase === 'Running' && p.status.containerStatuses?.[0]?.ready) return;
    if (p?.status?.phase === 'Failed' || p?.status?.phase === 'Succeeded')
      throw new Error(`session pod ${namespace}/${pod} ended: ${JSON.stringify(p.status)}`);
    if (Date.now() > until)
      throw new Error(`session pod ${namespace}/${pod} not ready: ${JSON.stringify(p?.status)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function getSandbox(cluster: KubeCluster, namespace: string, name: string): Promise<Sandbox> {
  return (await cluster.kc
    .makeApiClient(CustomObjectsApi)
    .getNamespacedCustomObject({ ...api, namespace, name })) as Sandbox;
}

/** Writes the Sandbox's status in one resourceVersion-guarded PUT, as the operator does. */
export async function writeStatus(
  cluster: KubeCluster,
  sandbox: Sandbox,
  status: SandboxStatus,
): Promise<Sandbox> {
  const namespace = sandbox.metadata.namespace ?? '';
  const name = sandbox.metadata.name ?? '';
  return (await cluster.kc.makeApiClient(CustomObjectsApi).replaceNamespacedCustomObjectStatus({
    ...api,
    namespace,
    name,
    body: { ...sandbox, status },
  })) as Sandbox;
}

/** Plays the operator for every Sandbox made in `namespace` until stopped. */
export function serveSessionPods(
  cluster: KubeCluster,
  namespace: string,
): { stop(): void; done: Promise<void> } {
  let stopped = false;
  const seen = new Set<string>();
  const serveOne = async (sandbox: Sandbox): Promise<void> => {
    const name = sandbox.metadata.name ?? '';
    const podBody = sessionPod(sandbox);
    const podName = podBody.metadata?.name ?? '';
    try {
      await cluster.core.createNamespacedPod({ namespace, body: podBody });
      await waitRunnerReady(cluster, namespace, podName);
      const fresh = await getSandbox(cluster, namespace, name);
      await writeStatus(cluster, fresh, {
        phase: 'Ready',
        reason: 'Created',
        podName,
        readyTime: new Date().toISOString(),
      });
    } catch (e) {
      const fresh = await getSandbox(cluster, namespace, name).catch(() => undefined);
      if (fresh && !stopped)
        await writeStatus(cluster, fresh, {
          phase: 'Failed',
          reason: 'BackendError',
          message: (e as Error).message,
        }).catch(() => {});
    }
  };
  const done = (async () => {
    while (!stopped) {
      const list = (await cluster.kc
        .makeApiClient(CustomObjectsApi)
        .listNamespacedCustomObject({ ...api, namespace })
        .catch(() => ({ items: [] }))) as { items: Sandbox[] };
      for (const sandbox of list.items) {
        const uid = sandbox.metadata.uid ?? '';
        if (seen.has(uid) || sandbox.status?.phase) continue;
        seen.add(uid);
        void serveOne(sandbox);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    stop: () => {
      stopped = true;
    },
    done,
  };
}
