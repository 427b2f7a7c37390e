/**
 * sandpit's seccomp profile (src/policy/seccomp.ts, in Docker's format) in the form an OCI runtime
 * takes: what dockerd itself does with a profile before it hands the spec to runc (moby's
 * profiles/seccomp LoadProfile): the host's architecture and its sub-architectures, and only the
 * rules whose arch, capability and kernel conditions hold for a sandbox without capabilities on
 * this host. Pure: the host's facts are arguments.
 */
import type { SeccompProfile } from '../../policy/seccomp.js';
import type { OciSeccomp, OciSeccompArg, OciSeccompRule } from './oci-spec.js';

export interface SeccompHost {
  /** Go's name for the host architecture, as the profile's `arches` conditions use it (amd64, arm64, …). */
  arch: string;
  /** The host kernel's release (uname -r), for `minKernel` conditions. */
  kernel: string;
  /** Capabilities the sandbox keeps (sandpit's keep none). */
  capabilities?: readonly string[];
}

/** Go's architecture names → libseccomp's (moby's `nativeToSeccomp`). */
const SECCOMP_ARCH: Record<string, string> = {
  amd64: 'SCMP_ARCH_X86_64',
  arm64: 'SCMP_ARCH_AARCH64',
  mips64: 'SCMP_ARCH_MIPS64',
  mips64n32: 'SCMP_ARCH_MIPS64N32',
  mipsel64: 'SCMP_ARCH_MIPSEL64',
  mipsel64n32: 'SCMP_ARCH_MIPSEL64N32',
  s390x: 'SCMP_ARCH_S390X',
};

/** Node's `process.arch` → Go's name, which the profile's conditions use. */
export function goArch(nodeArch: string): string {
  const map: Record<string, string> = { x64: 'amd64', arm64: 'arm64', s390x: 's390x', ia32: '386' };
  return map[nodeArch] ?? nodeArch;
}

interface Condition {
  arches?: string[];
  caps?: string[];
  minKernel?: string;
}

export function toOciSeccomp(profile: SeccompProfile, host: SeccompHost): OciSeccomp {
  const native = SECCOMP_ARCH[host.arch];
  const archMap = (profile.archMap ?? []) as { architecture: string; subArchitectures?: string[] }[];
  const entry = archMap.find((a) => a.architecture === native);
  const caps = host.capabilities ?? [];
  const syscalls: OciSeccompRule[] = [];
  for (const rule of profile.syscalls) {
    if (!applies(rule, host, caps)) continue;
    const errnoRet = rule.errnoRet as number | undefined;
    syscalls.push({
      names: [...rule.names],
      action: rule.action,
      ...(rule.args && rule.args.length > 0 ? { args: rule.args.map(toArg) } : {}),
      ...(errnoRet !== undefined ? { errnoRet } : {}),
    });
  }
  const defaultErrnoRet = profile.defaultErrnoRet as number | undefined;
  return {
    defaultAction: profile.defaultAction,
    ...(defaultErrnoRet !== undefined ? { defaultErrnoRet } : {}),
    architectures: entry ? [entry.architecture, ...(entry.subArchitectures ?? [])] : [],
    syscalls,
  };
}

function toArg(a: { index: number; value: number; valueTwo?: number; op: string }): OciSeccompArg {
  return { index: a.index, value: a.value, ...(a.valueTwo ? { valueTwo: a.valueTwo } : {}), op: a.op };
}

/** moby's rule filter: every `includes` condition holds, and no `excludes` one does. */
function applies(
  rule: { includes?: Record<string, unknown>; excludes?: Record<string, unknown> },
  host: SeccompHost,
  caps: readonly string[],
): boolean {
  const includes: Condition = rule.includes ?? {};
  const excludes: Condition = rule.excludes ?? {};
  const included =
    (!includes.arches?.length || includes.arches.includes(host.arch)) &&
    (includes.caps ?? []).every((c) => caps.includes(c)) &&
    (!includes.minKernel || compareKernel(host.kernel, includes.minKernel) >= 0);
  const excluded =
    (excludes.arches ?? []).includes(host.arch) || (excludes.caps ?? []).some((c) => caps.includes(c));
  return included && !excluded;
}

/** Compares kernel releases by their numeric major.minor.patch ("6.18.44-fc" against "4.8"). */
export function compareKernel(a: string, b: string): number {
  const parts = (v: string): number[] =>
    (/^(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(v) ?? []).slice(1, 4).map((n) => Number(n ?? 0));
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
