/**
 * sandpit's seccomp profile, the one both backends apply: Docker 20.10's default profile
 * (docker-default-20.10.json, moby's profiles/seccomp/default.json as Debian ships it in
 * golang-github-docker-docker-dev) without io_uring, a large kernel attack surface that this
 * Docker release still allows, and with ptrace(2) only for CAP_SYS_PTRACE (which no sandbox
 * has), as that profile already keeps process_vm_readv: Docker allows it to everyone on kernels
 * from 4.8, so a program could trace its own other processes under runc (gVisor refuses, as
 * Yama's ptrace_scope 1 does), and ptrace has been a way to a kernel bug (CVE-2019-13272). Pure.
 *
 * Under gVisor the profile is applied inside the sandbox (runsc --oci-seccomp) to the system calls
 * the Sentry serves. There the runner gives the program its own user and PID namespaces (see
 * images/runner/sandpit-runner.c), which the Sentry implements itself, so the gVisor profile lets
 * clone(2) create those two and no other. And there clone3(2) is refused by SCMP_ACT_TRACE, not by
 * Docker's SCMP_ACT_ERRNO with errnoRet ENOSYS: runsc before 2023 ignores errnoRet and answers
 * EPERM, and glibc falls back from clone3 to clone only on ENOSYS, so no thread could start (node
 * aborted at start-up; found by the hostile tier's thread bomb). With no tracer, SCMP_ACT_TRACE
 * fails the call with ENOSYS on every runsc, as on Linux.
 *
 * On Kubernetes the same two profiles are `localhost/` profiles in each node's kubelet seccomp
 * directory (SECCOMP_PROFILE_FILES): generated into the chart (npm run gen:crd), which installs them
 * with a DaemonSet, and copied there by the test cluster's script; with their conditions decided
 * for a pod without capabilities (withoutConditions), since the runtime does not decide them there.
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

/** Allowed only by a rule that asks for a capability (CAP_SYS_PTRACE): never to a sandbox. */
export const TRACE_SYSCALLS = ['ptrace'] as const;

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
    .map((rule) => ({
      ...rule,
      names: rule.names.filter(
        (n) => !isIoUring(n) && !(isTrace(n) && !listOf(rule.includes, 'caps').length),
      ),
    }))
    .filter((rule) => rule.names.length > 0)
    .map((rule) => (options.gvisor ? withClone3Unimplemented(withSentryNamespaces(rule)) : rule));
  return { ...base, syscalls };
}

function isIoUring(name: string): boolean {
  return (IO_URING_SYSCALLS as readonly string[]).includes(name);
}

function isTrace(name: string): boolean {
  return (TRACE_SYSCALLS as readonly string[]).includes(name);
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

const ENOSYS = 38;

/** Docker's rule that makes clone3(2) fail with ENOSYS, as SCMP_ACT_TRACE (ENOSYS with no tracer). */
function withClone3Unimplemented(rule: SeccompRule): SeccompRule {
  if (rule.names.length !== 1 || rule.names[0] !== 'clone3') return rule;
  if (rule.action !== 'SCMP_ACT_ERRNO' || rule.errnoRet !== ENOSYS) return rule;
  const { errnoRet: _errnoRet, ...traced } = rule;
  return { ...traced, action: 'SCMP_ACT_TRACE' };
}

/** The profiles' paths below a kubelet's seccomp directory: the pods' `localhostProfile`. */
export const SECCOMP_PROFILE_FILES = {
  runc: 'sandpit/runc.json',
  gvisor: 'sandpit/gvisor.json',
} as const;

/** Where the chart keeps the generated profiles (its DaemonSet writes them to every node). */
export const SECCOMP_CHART_DIR = 'charts/sandpit/files/seccomp';

/** Architectures a sandpit node runs on: rules for any other are left out of the kubelet's files. */
const NODE_ARCHES = ['amd64', 'x32', 'x86', 'arm', 'arm64'];

/**
 * The profile with its conditions decided for a sandbox pod, which has no capabilities and runs on
 * amd64 or arm64: a rule that needs a capability goes; one that needs a capability's absence stays,
 * unconditionally; a rule only for another architecture (s390, mips, ppc64le) goes. A kubelet's
 * localhost profile reaches the runtime without its conditions decided: on the test cluster the
 * CAP_SYS_ADMIN rule applied to pods that have no capability (unshare(2) of a user namespace
 * worked; test/hostile). So the kubelet's files carry no capability condition at all.
 */
export function withoutConditions(profile: SeccompProfile): SeccompProfile {
  const syscalls = profile.syscalls
    .filter((rule) => !listOf(rule.includes, 'caps').length)
    .filter((rule) => {
      const arches = listOf(rule.includes, 'arches');
      return !arches.length || arches.some((a) => NODE_ARCHES.includes(a));
    })
    .map((rule) => {
      const { caps: _excludedCaps, ...excludes } = rule.excludes ?? {};
      return { ...rule, excludes };
    });
  return { ...profile, syscalls };
}

function listOf(conditions: Record<string, unknown> | undefined, key: string): string[] {
  const value = conditions?.[key];
  return Array.isArray(value) ? (value as string[]) : [];
}

/** A kubelet's localhost profile (the chart's files): the profile with its conditions decided. */
export function renderSeccompProfile(options: SeccompOptions): string {
  return `${JSON.stringify(withoutConditions(buildSeccompProfile(options)), null, 2)}\n`;
}

/** The generated profile files: path (relative to the repository root) and text. */
export function generatedSeccompFiles(): { path: string; text: string }[] {
  return (Object.keys(SECCOMP_PROFILE_FILES) as (keyof typeof SECCOMP_PROFILE_FILES)[]).map((kind) => ({
    path: `${SECCOMP_CHART_DIR}/${kind}.json`,
    text: renderSeccompProfile({ gvisor: kind === 'gvisor' }),
  }));
}
