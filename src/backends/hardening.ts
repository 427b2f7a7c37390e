/**
 * What every sandbox container is made of, whichever engine makes it: the one decision that the
 * Docker backend (docker/container-config.ts) and the OCI backend (oci/runtime-spec.ts) each
 * render in their own format. Pure.
 */
import type { SandboxShape } from '../policy/shape.js';
import { buildSeccompProfile, type SeccompProfile } from '../policy/seccomp.js';

export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;
export const SANDBOX_USER = `${SANDBOX_UID}:${SANDBOX_GID}`;
export const SANDBOX_HOSTNAME = 'sandbox';

/**
 * The sandbox's only nameserver: TEST-NET-1 (RFC 5737), reserved and never routed. With no route
 * at all in the sandbox, a lookup fails with ENETUNREACH before any packet exists, whereas an
 * empty resolv.conf would make glibc query 127.0.0.1 and send packets on the sandbox's loopback.
 */
export const UNROUTABLE_NAMESERVER = '192.0.2.1';
/** One quick attempt, no search domains. */
export const RESOLVER_OPTIONS = ['attempts:1', 'timeout:1'] as const;

/** gVisor's own threads count against the pids cgroup; a warm runsc sandbox dies at 64 (notes). */
export const RUNSC_PIDS_OVERHEAD = 384;

/** /dev/shm: the size Docker gives it by default, stated so that every engine makes the same one. */
export const SHM_BYTES = 64 * 1024 ** 2;

/** Whether the shape's sandbox runs under gVisor. */
export function isGvisor(shape: Pick<SandboxShape, 'runtime'>): boolean {
  return shape.runtime === 'runsc';
}

/** The pids limit the engine sets: the program's, plus gVisor's own threads under runsc. */
export function pidsLimit(shape: Pick<SandboxShape, 'runtime' | 'limits'>): number {
  return isGvisor(shape) ? shape.limits.pids + RUNSC_PIDS_OVERHEAD : shape.limits.pids;
}

/** sandpit's seccomp profile for the shape's runtime (gVisor applies it inside, runsc --oci-seccomp). */
export function seccompProfileFor(shape: Pick<SandboxShape, 'runtime'>): SeccompProfile {
  return buildSeccompProfile({ gvisor: isGvisor(shape) });
}

export interface TmpfsMount {
  path: string;
  /** Mount options, in the order Docker's `--tmpfs` takes them. */
  options: string[];
}

/** The writable places: /tmp and the workspace, size-limited, no setuid or devices; the workspace is 1000's. */
export function sandboxTmpfs(shape: Pick<SandboxShape, 'workdir' | 'limits'>): TmpfsMount[] {
  const { limits } = shape;
  return [
    { path: '/tmp', options: ['rw', 'exec', 'nosuid', 'nodev', `size=${limits.tmpBytes}`, 'mode=1777'] },
    {
      path: shape.workdir,
      options: [
        'rw',
        'exec',
        'nosuid',
        'nodev',
        `size=${limits.workspaceBytes}`,
        `uid=${SANDBOX_UID}`,
        `gid=${SANDBOX_GID}`,
        'mode=0755',
      ],
    },
  ];
}

export interface Rlimit {
  name: 'nofile' | 'fsize' | 'core';
  soft: number;
  hard: number;
}

/** Open files and file size as the policy says, and no core dumps. */
export function sandboxRlimits(limits: SandboxShape['limits']): Rlimit[] {
  return [
    { name: 'nofile', soft: limits.openFiles, hard: limits.openFiles },
    { name: 'fsize', soft: limits.fileSizeBytes, hard: limits.fileSizeBytes },
    { name: 'core', soft: 0, hard: 0 },
  ];
}

/** resolv.conf's text: the unroutable nameserver only. */
export function resolvConf(): string {
  return `nameserver ${UNROUTABLE_NAMESERVER}\noptions ${RESOLVER_OPTIONS.join(' ')}\n`;
}

/**
 * The host directory mounted read-only at EGRESS_SOCKET_DIR (it holds the egress proxy's socket):
 * an allowlist sandbox's gate directory; none for a sandbox without egress, whatever is offered.
 */
export function egressDirOf(
  shape: Pick<SandboxShape, 'network'>,
  egressDir: string | undefined,
): string | undefined {
  if (shape.network.egress === 'none') return undefined;
  if (!egressDir) throw new Error('an egress sandbox needs the directory of its proxy socket');
  return egressDir;
}
