/**
 * buildSandboxPod(): the hardened pod every sandbox runs in, whatever its program (a run's job
 * today, a session's runner next). Pure. Pod Security Standards "restricted" profile throughout
 * (non-root 1000:1000, no privilege escalation, every capability dropped, seccomp RuntimeDefault,
 * read-only root filesystem); no service account token, no service links, no host namespaces; no
 * DNS that leaves the pod while egress is none; a size-limited workspace and /tmp; the policy's
 * RuntimeClass and limits. The caller adds only what its program needs: the command, its inputs
 * (read-only volumes) and a deadline.
 */
import { SANDBOX_CONTAINER } from '../../api/v1alpha1/labels.js';
import type {
  Container,
  ObjectMeta,
  Pod,
  PodSecurityContext,
  SecurityContext,
  Volume,
  VolumeMount,
} from '../../kube/objects.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import { formatSize } from '../../shared/quantity.js';

export const SANDBOX_UID = 1000;
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

/** What runs in the sandbox container, and what it needs beyond the workspace and /tmp. */
export interface SandboxProgram {
  command: string[];
  /** Inputs, mounted read-only. */
  inputs?: { mount: VolumeMount; volume: Volume }[];
}

export interface SandboxPodInput {
  meta: ObjectMeta;
  /** The policy's decision: image, working directory, limits, RuntimeClass. */
  spec: EffectiveSpec;
  settings: PodSettings;
  program: SandboxProgram;
  /** The pod's hard end (activeDeadlineSeconds), when it has one. */
  activeDeadlineSeconds?: number;
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

function sandboxContainer(i: SandboxPodInput): Container {
  const { limits } = i.spec;
  return {
    name: SANDBOX_CONTAINER,
    image: i.spec.image,
    imagePullPolicy: i.settings.imagePullPolicy,
    command: i.program.command,
    workingDir: i.spec.workdir,
    resources: {
      limits: { cpu: cpuQuantity(limits.cpuMilli), memory: formatSize(limits.memoryBytes) },
      requests: {
        cpu: cpuQuantity(Math.min(i.settings.cpuRequestMilli, limits.cpuMilli)),
        memory: formatSize(Math.min(i.settings.memoryRequestBytes, limits.memoryBytes)),
      },
    },
    securityContext: containerSecurityContext(),
    volumeMounts: [
      { name: 'workspace', mountPath: i.spec.workdir },
      { name: 'tmp', mountPath: '/tmp' },
      ...(i.program.inputs ?? []).map((input) => ({ ...input.mount, readOnly: true })),
    ],
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    stdin: false,
    tty: false,
  };
}

export function buildSandboxPod(i: SandboxPodInput): Pod {
  const { spec } = i;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: i.meta,
    spec: {
      restartPolicy: 'Never',
      ...(i.activeDeadlineSeconds !== undefined ? { activeDeadlineSeconds: i.activeDeadlineSeconds } : {}),
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
      containers: [sandboxContainer(i)],
      volumes: [
        { name: 'workspace', emptyDir: { sizeLimit: formatSize(spec.limits.workspaceBytes) } },
        { name: 'tmp', emptyDir: { sizeLimit: formatSize(spec.limits.tmpBytes) } },
        ...(i.program.inputs ?? []).map((input) => input.volume),
      ],
    },
  };
}
