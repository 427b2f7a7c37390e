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

/**
 * Under gVisor the pids limit moves inside the sandbox, as the test cluster's runsc wrapper does
 * on Kubernetes (test/env/kube/runsc-cri.sh): the program's processes and threads are bounded by
 * RLIMIT_NPROC (sandboxRlimits), which the Sentry enforces for its own tasks (fork and
 * pthread_create fail with EAGAIN, as under runc's pids cgroup), and the pids cgroup bounds only
 * the sandbox's threads on the host: the Sentry, its gofers and, on the ptrace platform, stub
 * processes whose threads grow with guest processes × Sentry threads (~1,900 for 128 sleeping
 * processes). With the cgroup at the program's limit plus 384, a fork bomb made the Sentry panic
 * ("creating stub process") and the run end with no result (found by the hostile tier). Under runc
 * no RLIMIT_NPROC is set: the host kernel counts it per uid, across every sandbox.
 */
export const RUNSC_HOST_PIDS = 4096;
/** Host threads a guest process may cost gVisor (~15 measured), with room to spare. */
export const RUNSC_HOST_PIDS_PER_PROCESS = 32;

/** /dev/shm: the size Docker gives it by default, stated so that every engine makes the same one. */
export const SHM_BYTES = 64 * 1024 ** 2;

/** Whether the shape's sandbox runs under gVisor. */
export function isGvisor(shape: Pick<SandboxShape, 'runtime'>): boolean {
  return shape.runtime === 'runsc';
}

/** The pids limit the engine sets: the program's under runc; under runsc, room for gVisor's own threads. */
export function pidsLimit(shape: Pick<SandboxShape, 'runtime' | 'limits'>): number {
  if (!isGvisor(shape)) return shape.limits.pids;
  return Math.max(RUNSC_HOST_PIDS, shape.limits.pids * RUNSC_HOST_PIDS_PER_PROCESS);
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

/**
 * A tmpfs's inodes: one per page of its size, as many files as could each hold a byte. Without a
 * count, a tmpfs has half the host's RAM pages of inodes, and an inode fill of empty files (which
 * take no pages) ran until the memory limit killed the whole sandbox (found by the hostile tier);
 * with it, creating a file fails with ENOSPC, as on a full disk. gVisor ignores the option (its
 * tmpfs charges every file to the sandbox's memory), as Kubernetes' emptyDirs cannot say it.
 */
export function tmpfsInodes(bytes: number): number {
  return Math.max(1024, Math.floor(bytes / 4096));
}

/** The writable places: /tmp and the workspace, size- and inode-limited, no setuid or devices; the workspace is 1000's. */
export function sandboxTmpfs(shape: Pick<SandboxShape, 'workdir' | 'limits'>): TmpfsMount[] {
  const { limits } = shape;
  return [
    {
      path: '/tmp',
      options: [
        'rw',
        'exec',
        'nosuid',
        'nodev',
        `size=${limits.tmpBytes}`,
        `nr_inodes=${tmpfsInodes(limits.tmpBytes)}`,
        'mode=1777',
      ],
    },
    {
      path: shape.workdir,
      options: [
        'rw',
        'exec',
        'nosuid',
        'nodev',
        `size=${limits.workspaceBytes}`,
        `nr_inodes=${tmpfsInodes(limits.workspaceBytes)}`,
        `uid=${SANDBOX_UID}`,
        `gid=${SANDBOX_GID}`,
        'mode=0755',
      ],
    },
  ];
}

export interface Rlimit {
  name: 'nofile' | 'fsize' | 'core' | 'nproc';
  soft: number;
  hard: number;
}

/** Open files and file size as the policy says, no core dumps; under gVisor, the pids limit too (pidsLimit). */
export function sandboxRlimits(shape: Pick<SandboxShape, 'runtime' | 'limits'>): Rlimit[] {
  const { limits } = shape;
  return [
    { name: 'nofile', soft: limits.openFiles, hard: limits.openFiles },
    { name: 'fsize', soft: limits.fileSizeBytes, hard: limits.fileSizeBytes },
    { name: 'core', soft: 0, hard: 0 },
    ...(isGvisor(shape) ? [{ name: 'nproc' as const, soft: limits.pids, hard: limits.pids }] : []),
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
