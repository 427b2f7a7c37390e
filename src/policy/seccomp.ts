/**
 * sandpit's seccomp profile, the one both backends apply: Docker 20.10's default profile
 * (docker-default-20.10.json, moby's profiles/seccomp/default.json as Debian ships it in
 * golang-github-docker-docker-dev) without io_uring, a large kernel attack surface that this
 * Docker release still allows. Pure.
 *
 * Under gVisor the profile is applied inside the sandbox (runsc --oci-seccomp) to the system calls
 * the Sentry serves. There the runner gives the program its own user and PID namespaces (see
 * images/runner/sandpit-runner.c), which the Sentry implements itself, so the gVisor profile lets
 * clone(2) create those two and no other.
 *
 * On Kubernetes the same two profiles are `localhost/` profiles in each node's kubelet seccomp
 * directory (SECCOMP_PROFILE_FILES): generated into the chart (npm run gen:crd), which installs them
 * with a DaemonSet, and copied there by the test cluster's script.
 */
import dockerDefault from './seccomp/docker-default-20.10.json' with { type: 'json' };

interface SeccompArg {
  index: number;
  value: number;
  valueTwo?: number;
  op: string;
}

interface SeccompRule {
  names: string[];
  action: string;
  args?: SeccompArg[] | null;
  includes?: Record<string, unknown>;
  excludes?: Record<string, unknown>;
  [key: string]: unknown;
}

/** A profile in Docker's format (what the Engine API and the kubelet's localhost profiles take). */
export interface SeccompProfile {
  defaultAction: string;
  archMap?: unknown[];
  syscalls: SeccompRule[];
  [key: string]: unknown;
}

export const IO_URING_SYSCALLS = ['io_uring_setup', 'io_uring_enter', 'io_uring_register'] as const;

const CLONE_NEWUSER = 0x10000000;
const CLONE_NEWPID = 0x20000000;
/** The namespace flags Docker's profile keeps clone(2) from using without CAP_SYS_ADMIN. */
export const CLONE_NAMESPACE_FLAGS = 0x7e020000;

export interface SeccompOptions {
  /** The profile for gVisor: clone(2) may also create user and PID namespaces. */
  gvisor: boolean;
}

export function buildSeccompProfile(options: SeccompOptions): SeccompProfile {
  const base = structuredClone(dockerDefault) as SeccompProfile;
  const syscalls = base.syscalls
    .map((rule) => ({ ...rule, names: rule.names.filter((n) => !isIoUring(n)) }))
    .filter((rule) => rule.names.length > 0)
    .map((rule) => (options.gvisor ? withSentryNamespaces(rule) : rule));
  return { ...base, syscalls };
}

function isIoUring(name: string): boolean {
  return (IO_URING_SYSCALLS as readonly string[]).includes(name);
}

/** The rule that allows clone(2) without namespace flags, widened by CLONE_NEWUSER | CLONE_NEWPID. */
function withSentryNamespaces(rule: SeccompRule): SeccompRule {
  if (rule.names.length !== 1 || rule.names[0] !== 'clone' || !rule.args) return rule;
  return {
    ...rule,
    args: rule.args.map((arg) =>
      arg.op === 'SCMP_CMP_MASKED_EQ' && arg.value === CLONE_NAMESPACE_FLAGS
        ? { ...arg, value: CLONE_NAMESPACE_FLAGS & ~(CLONE_NEWUSER | CLONE_NEWPID) }
        : arg,
    ),
  };
}

/** The profiles' paths below a kubelet's seccomp directory: the pods' `localhostProfile`. */
export const SECCOMP_PROFILE_FILES = {
  runc: 'sandpit/runc.json',
  gvisor: 'sandpit/gvisor.json',
} as const;

/** Where the chart keeps the generated profiles (its DaemonSet writes them to every node). */
export const SECCOMP_CHART_DIR = 'charts/sandpit/files/seccomp';

export function renderSeccompProfile(options: SeccompOptions): string {
  return `${JSON.stringify(buildSeccompProfile(options), null, 2)}\n`;
}

/** The generated profile files: path (relative to the repository root) and text. */
export function generatedSeccompFiles(): { path: string; text: string }[] {
  return (Object.keys(SECCOMP_PROFILE_FILES) as (keyof typeof SECCOMP_PROFILE_FILES)[]).map((kind) => ({
    path: `${SECCOMP_CHART_DIR}/${kind}.json`,
    text: renderSeccompProfile({ gvisor: kind === 'gvisor' }),
  }));
}
