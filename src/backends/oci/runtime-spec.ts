/**
 * The OCI rendering of an effective spec: `SandboxShape` → config.json for runc or runsc. Pure and
 * tested field by field. It makes the container the Docker backend makes (container-config.ts, as
 * dockerd 20.10 turns it into a spec: test/fixtures/oci/dockerd-20.10-python.json) from the same
 * decision (../hardening.ts), plus a cgroup namespace, which Docker on cgroup v1 leaves out.
 */
import type { RunnerMode, SandboxShape } from '../../policy/shape.js';
import { EGRESS_SOCKET_DIR, RUNNER_PATH } from '../../runner/protocol.js';
import {
  egressDirOf,
  isGvisor,
  pidsLimit,
  sandboxRlimits,
  sandboxTmpfs,
  SANDBOX_GID,
  SANDBOX_HOSTNAME,
  SANDBOX_UID,
  seccompProfileFor,
  SHM_BYTES,
} from '../hardening.js';
import { LABELS } from '../docker/labels.js';
import type { OciDeviceRule, OciMount, OciSeccomp, OciSpec } from './oci-spec.js';
import { toOciSeccomp, type SeccompHost } from './seccomp.js';

/** What the spec is built around, besides the shape: where things are on this host. */
export interface RuntimeSpecOptions {
  /** The image's unpacked root filesystem (shared, never written: mounted read-only). */
  rootfs: string;
  /** The image's own environment (its config's Env). */
  imageEnv: readonly string[];
  /** Host files bind-mounted read-only over /etc/resolv.conf, /etc/hosts and /etc/hostname. */
  etc: { resolvConf: string; hosts: string; hostname: string };
  /** The run's cgroup, below the project's own parent (cgroup v1: one per controller). */
  cgroupsPath: string;
  /** Ownership, for the reaper (sandpit.dev/… keys). */
  annotations: Record<string, string>;
  /** The host's facts the seccomp profile depends on. */
  host: SeccompHost;
  /** `session`: the runner serves a stream of requests; `openWithinSeconds` bounds the wait for the first. */
  mode?: RunnerMode;
  openWithinSeconds?: number;
  /** The host's AppArmor profile for containers, where the host has AppArmor. */
  apparmorProfile?: string | undefined;
  /**
   * An allowlist sandbox's gate directory (it holds the egress proxy's socket): mounted read-only
   * at EGRESS_SOCKET_DIR and named in an annotation (for the reaper). Ignored without egress.
   */
  egressDir?: string | undefined;
}

/** Docker's PATH for a container whose image sets none. */
const DEFAULT_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Docker's masked and read-only /proc and /sys paths (moby oci/defaults.go). */
export const MASKED_PATHS = [
  '/proc/asound',
  '/proc/acpi',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
];
export const READONLY_PATHS = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

/** Docker's device rules: nothing, then null, zero, full, random, urandom, tty and console; never fuse. */
const DEVICE_RULES: OciDeviceRule[] = [
  { allow: false, access: 'rwm' },
  ...[
    [1, 5],
    [1, 3],
    [1, 9],
    [1, 8],
    [5, 0],
    [5, 1],
  ].map(([major, minor]) => ({ allow: true, type: 'c' as const, major, minor, access: 'rwm' })),
  { allow: false, type: 'c', major: 10, minor: 229, access: 'rwm' },
];

/** The kernel file systems every container gets, as Docker mounts them. */
const KERNEL_MOUNTS: OciMount[] = [
  { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
  {
    destination: '/dev',
    type: 'tmpfs',
    source: 'tmpfs',
    options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
  },
  {
    destination: '/dev/pts',
    type: 'devpts',
    source: 'devpts',
    options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
  },
  { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
  {
    destination: '/sys/fs/cgroup',
    type: 'cgroup',
    source: 'cgroup',
    options: ['ro', 'nosuid', 'noexec', 'nodev'],
  },
  { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
  {
    destination: '/dev/shm',
    type: 'tmpfs',
    source: 'shm',
    options: ['nosuid', 'noexec', 'nodev', 'mode=1777', `size=${SHM_BYTES}`],
  },
];

/** The CFS period Docker uses for NanoCpus; the quota is the CPU share of it. */
export const CPU_PERIOD_US = 100_000;

export function buildRuntimeSpec(shape: SandboxShape, options: RuntimeSpecOptions): OciSpec {
  const { limits } = shape;
  const egressDir = egressDirOf(shape, options.egressDir);
  return {
    ociVersion: '1.0.2-dev',
    process: {
      terminal: false,
      user: { uid: SANDBOX_UID, gid: SANDBOX_GID, additionalGids: [SANDBOX_GID] },
      args: runnerArgs(options),
      env: containerEnv(options.imageEnv),
      cwd: shape.workdir,
      capabilities: {},
      rlimits: sandboxRlimits(shape).map((r) => ({
        type: `RLIMIT_${r.name.toUpperCase()}`,
        hard: r.hard,
        soft: r.soft,
      })),
      noNewPrivileges: true,
      oomScoreAdj: 0,
      ...(options.apparmorProfile ? { apparmorProfile: options.apparmorProfile } : {}),
    },
    root: { path: options.rootfs, readonly: true },
    hostname: SANDBOX_HOSTNAME,
    mounts: [
      ...KERNEL_MOUNTS,
      ...sandboxTmpfs(shape).map((m) => ({
        destination: m.path,
        type: 'tmpfs',
        source: 'tmpfs',
        options: ['rprivate', ...m.options],
      })),
      readOnlyBind('/etc/resolv.conf', options.etc.resolvConf),
      readOnlyBind('/etc/hostname', options.etc.hostname),
      readOnlyBind('/etc/hosts', options.etc.hosts),
      // The proxy's socket is the one thing on the host an egress sandbox reaches; read-only, so it
      // can connect there but bind nothing.
      ...(egressDir ? [readOnlyBind(EGRESS_SOCKET_DIR, egressDir)] : []),
    ],
    annotations: { ...options.annotations, ...(egressDir ? { [LABELS.egressDir]: egressDir } : {}) },
    linux: {
      // What Docker 20.10 sets in a container with its own network namespace.
      sysctl: {
        'net.ipv4.ip_unprivileged_port_start': '0',
        'net.ipv4.ping_group_range': '0 2147483647',
      },
      resources: {
        devices: DEVICE_RULES.map((d) => ({ ...d })),
        memory: { limit: limits.memoryBytes, swap: limits.memoryBytes, disableOOMKiller: false },
        cpu: { quota: Math.round((limits.cpuMilli * CPU_PERIOD_US) / 1000), period: CPU_PERIOD_US },
        pids: { limit: pidsLimit(shape) },
      },
      cgroupsPath: options.cgroupsPath,
      // A fresh one of each: the network namespace has only lo (runc brings it up; runsc --network=none).
      namespaces: (['mount', 'network', 'uts', 'pid', 'ipc', 'cgroup'] as const).map((type) => ({ type })),
      seccomp: seccompFor(isGvisor(shape), options.host),
      maskedPaths: [...MASKED_PATHS],
      readonlyPaths: [...READONLY_PATHS],
    },
  };
}

function runnerArgs(options: RuntimeSpecOptions): string[] {
  if (options.mode !== 'session') return [RUNNER_PATH];
  return [RUNNER_PATH, '--session', '--open-within', String(options.openWithinSeconds ?? 60)];
}

function readOnlyBind(destination: string, source: string): OciMount {
  return { destination, type: 'bind', source, options: ['rbind', 'ro', 'rprivate'] };
}

/** Docker's container environment: its PATH and HOSTNAME, each replaced by the image's own where it sets one. */
export function containerEnv(imageEnv: readonly string[]): string[] {
  const env = [DEFAULT_PATH, `HOSTNAME=${SANDBOX_HOSTNAME}`];
  for (const entry of imageEnv) {
    const name = entry.slice(0, entry.indexOf('=') + 1 || entry.length);
    const at = env.findIndex((e) => e.startsWith(name.endsWith('=') ? name : `${name}=`));
    if (at >= 0) env[at] = entry;
    else env.push(entry);
  }
  return env;
}

/** The rendered profile, once per runtime and host (it is the largest part of the spec). */
const rendered = new Map<string, OciSeccomp>();

function seccompFor(gvisor: boolean, host: SeccompHost): OciSeccomp {
  const key = JSON.stringify([gvisor, host.arch, host.kernel, host.capabilities ?? []]);
  let seccomp = rendered.get(key);
  if (!seccomp) {
    seccomp = toOciSeccomp(seccompProfileFor({ runtime: gvisor ? 'runsc' : undefined }), host);
    rendered.set(key, seccomp);
  }
  return structuredClone(seccomp);
}
