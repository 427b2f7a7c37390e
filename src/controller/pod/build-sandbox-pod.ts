/**
 * buildSandboxPod(): the hardened pod every sandbox runs in, whatever its program (a run's job
 * today, a session's runner next). Pure. Pod Security Standards "restricted" profile throughout
 * (non-root 1000:1000, no privilege escalation, every capability dropped, sandpit's own seccomp
 * profile (src/policy/seccomp.ts) as a localhost profile, read-only root filesystem); no service
 * account token, no service links, no host namespaces; no DNS that leaves the pod while egress is
 * none; the policy's RuntimeClass and limits. The workspace and /tmp are memory-backed emptyDirs
 * (tmpfs, as on the Docker backend): what the program writes there is charged to the container's
 * memory limit and never reaches the node's disk, whether or not the kubelet's eviction acts on
 * their sizeLimit. The caller adds only what its program needs: the command, its inputs
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
import { SECCOMP_PROFILE_FILES } from '../../policy/seccomp.js';
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
  seccomp: SeccompSettings;
}

export interface SeccompSettings {
  /** Localhost: sandpit's profiles in the kubelet's seccomp directory; RuntimeDefault: the runtime's. */
  profile: 'Localhost' | 'RuntimeDefault';
  /** RuntimeClasses whose handler is gVisor: their pods take the gVisor profile. */
  gvisorRuntimeClasses: readonly string[];
}

/** What runs in the sandbox container, and what it needs beyond the workspace and /tmp. */
export interface SandboxProgram {
  command: string[];
  /** Inputs, mounted read-only. */
  inputs?: { mount: VolumeMount; volume: Volume }[];
  /** Keep the container's stdin open for attaches (a session's runner reads its requests there). */
  stdin?: boolean;
  /**
   * Close stdin when the first attach ends (a pool pod of mode run: one job, one attach). Otherwise
   * the first attach closing must not close the runner's stdin (a restarted gateway attaches again).
   */
  stdinOnce?: boolean;
  /**
   * The container's environment (what `kubectl exec` sees; the runner gives its children their
   * own, and passes on only what a job names, such as the proxy variables from a Secret).
   */
  env?: NonNullable<Container['env']>;
}

/** What the pod is made of, from the policy's decision on a run or a session. */
export type SandboxShape = Pick<EffectiveSpec, 'image' | 'workdir' | 'limits' | 'runtime'>;

export interface SandboxPodInput {
  meta: ObjectMeta;
  /** The policy's decision: image, working directory, limits, RuntimeClass. */
  spec: SandboxShape;
  settings: PodSettings;
  program: SandboxProgram;
  /** The pod's hard end (activeDeadlineSeconds), when it has one. */
  activeDeadlineSeconds?: number;
}

export const cpuQuantity = (milli: number): string =>
  milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;

type SeccompProfile = NonNullable<SecurityContext['seccompProfile']>;

/** The seccomp profile of a pod in `runtimeClass`. */
export function seccompProfile(settings: SeccompSettings, runtimeClass: string | undefined): SeccompProfile {
  if (settings.profile === 'RuntimeDefault') return { type: 'RuntimeDefault' };
  const gvisor = runtimeClass !== undefined && settings.gvisorRuntimeClasses.includes(runtimeClass);
  return { type: 'Localhost', localhostProfile: SECCOMP_PROFILE_FILES[gvisor ? 'gvisor' : 'runc'] };
}

export function podSecurityContext(seccomp: SeccompProfile): PodSecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: SANDBOX_UID,
    runAsGroup: SANDBOX_UID,
    fsGroup: SANDBOX_UID,
    seccompProfile: seccomp,
  };
}

export function containerSecurityContext(seccomp: SeccompProfile): SecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: SANDBOX_UID,
    runAsGroup: SANDBOX_UID,
    privileged: false,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: seccomp,
  };
}

/** A tmpfs: counted against the memory limit; the kubelet sizes it by sizeLimit (SizeMemoryBackedVolumes). */
const memoryVolume = (name: string, bytes: number): Volume => ({
  name,
  emptyDir: { medium: 'Memory', sizeLimit: formatSize(bytes) },
});

function sandboxContainer(i: SandboxPodInput): Container {
  const { limits } = i.spec;
  return {
    name: SANDBOX_CONTAINER,
    image: i.spec.image,
    imagePullPolicy: i.settings.imagePullPolicy,
    command: i.program.command,
    ...(i.program.env?.length ? { env: i.program.env } : {}),
    workingDir: i.spec.workdir,
    resources: {
      limits: { cpu: cpuQuantity(limits.cpuMilli), memory: formatSize(limits.memoryBytes) },
      requests: {
        cpu: cpuQuantity(Math.min(i.settings.cpuRequestMilli, limits.cpuMilli)),
        memory: formatSize(Math.min(i.settings.memoryRequestBytes, limits.memoryBytes)),
      },
    },
    securityContext: containerSecurityContext(seccompProfile(i.settings.seccomp, i.spec.runtime)),
    volumeMounts: [
      { name: 'workspace', mountPath: i.spec.workdir },
      { name: 'tmp', mountPath: '/tmp' },
      ...(i.program.inputs ?? []).map((input) => ({ ...input.mount, readOnly: true })),
    ],
    // The runner writes its bounded exit report there last (the program's file-size limit bounds
    // whatever the program wrote before); the kubelet reads at most 4 KiB of it.
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    stdin: i.program.stdin === true,
    ...(i.program.stdin ? { stdinOnce: i.program.stdinOnce === true } : {}),
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
      securityContext: podSecurityContext(seccompProfile(i.settings.seccomp, spec.runtime)),
      containers: [sandboxContainer(i)],
      volumes: [
        memoryVolume('workspace', spec.limits.workspaceBytes),
        memoryVolume('tmp', spec.limits.tmpBytes),
        ...(i.program.inputs ?? []).map((input) => input.volume),
      ],
    },
  };
}
