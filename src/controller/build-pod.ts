/**
 * buildPod(): the Pod that runs one SandboxRun. Pure: the same run, decision and settings give the
 * same Pod. Pod Security Standards "restricted" profile throughout; no service account token, no
 * service links, no host namespaces, no DNS that leaves the pod while egress is none; inputs come
 * from the owned ConfigMap as a framed job that `sandpit-runner --plain` reads.
 */
import type { Container, Pod, PodSecurityContext, SecurityContext } from '../kube/objects.js';
import type { EffectiveSpec } from '../policy/evaluate.js';
import { formatSize } from '../shared/quantity.js';
import { childMeta, type RunRef } from './children.js';

export const SANDBOX_CONTAINER = 'sandbox';
export const SANDBOX_UID = 1000;
export const JOB_KEY = 'job.bin';
export const JOB_DIR = '/sandpit/job';
export const RUNNER = '/usr/local/bin/sandpit-runner';
/** A nameserver nobody answers on inside the pod's own network namespace: lookups fail, no packet leaves. */
export const LOOPBACK_NAMESERVER = '127.0.0.1';

export type ImagePullPolicy = 'IfNotPresent' | 'Never' | 'Always';

export interface PodSettings {
  imagePullPolicy: ImagePullPolicy;
  /** CPU request in millicores: small, so many runs fit a node; the limit comes from the policy. */
  cpuRequestMilli: number;
  /** Memory request in bytes (at most the limit). */
  memoryRequestBytes: number;
  /**
   * Added to timeoutSeconds for activeDeadlineSeconds. The runner enforces the exact deadline from
   * the program's start; activeDeadlineSeconds counts from the pod's start (before the container
   * exists), so without this grace a slow start would eat the program's time.
   */
  startGraceSeconds: number;
}

export const cpuQuantity = (milli: number): string =>
  milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;

export function podSecurityContext(): PodSecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: SANDBOX_UID,
    runAsGroup: SANDBOX_UID,
    fsGroup: SANDBOX_UID,
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

export function containerSecurityContext(): SecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: SANDBOX_UID,
    runAsGroup: SANDBOX_UID,
    privileged: false,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

function container(spec: EffectiveSpec, settings: PodSettings): Container {
  const { limits } = spec;
  return {
    name: SANDBOX_CONTAINER,
    image: spec.image,
    imagePullPolicy: settings.imagePullPolicy,
    command: [RUNNER, '--job', `${JOB_DIR}/${JOB_KEY}`, '--plain'],
    workingDir: spec.workdir,
    resources: {
      limits: { cpu: cpuQuantity(limits.cpuMilli), memory: formatSize(limits.memoryBytes) },
      requests: {
        cpu: cpuQuantity(Math.min(settings.cpuRequestMilli, limits.cpuMilli)),
        memory: formatSize(Math.min(settings.memoryRequestBytes, limits.memoryBytes)),
      },
    },
    securityContext: containerSecurityContext(),
    volumeMounts: [
      { name: 'workspace', mountPath: spec.workdir },
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'job', mountPath: JOB_DIR, readOnly: true },
    ],
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    stdin: false,
    tty: false,
  };
}

export function buildPod(run: RunRef, spec: EffectiveSpec, settings: PodSettings): Pod {
  const meta = childMeta(run);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: meta,
    spec: {
      restartPolicy: 'Never',
      activeDeadlineSeconds: spec.limits.timeoutSeconds + settings.startGraceSeconds,
      terminationGracePeriodSeconds: 1,
      ...(spec.runtime ? { runtimeClassName: spec.runtime } : {}),
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      shareProcessNamespace: false,
      dnsPolicy: 'None',
      dnsConfig: {
        nameservers: [LOOPBACK_NAMESERVER],
        searches: [],
        options: [
          { name: 'attempts', value: '1' },
          { name: 'timeout', value: '1' },
        ],
      },
      securityContext: podSecurityContext(),
      containers: [container(spec, settings)],
      volumes: [
        { name: 'workspace', emptyDir: { sizeLimit: formatSize(spec.limits.workspaceBytes) } },
        { name: 'tmp', emptyDir: { sizeLimit: formatSize(spec.limits.tmpBytes) } },
        {
          name: 'job',
          configMap: { name: meta.name ?? '', items: [{ key: JOB_KEY, path: JOB_KEY }], defaultMode: 0o444 },
        },
      ],
    },
  };
}
