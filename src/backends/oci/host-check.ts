/**
 * Whether this machine can run the OCI backend: root, a cgroup hierarchy with the memory controller,
 * and the runtimes (their versions). What `health()` and `sandpit doctor` report.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { OciHost } from './oci-container.js';
import { runtimeInvocation } from './runtime-command.js';
import type { OciRuntime } from './layout.js';

const run = promisify(execFile);

export interface HostCheck {
  /** Whether this process runs as root. */
  root: boolean;
  /** The cgroup hierarchy found ("v1 (memory controller at …)"), or undefined. */
  cgroups: string | undefined;
  /** Each runtime found, with its version ("runc 1.1.5+ds1"). */
  runtimes: string[];
  /** runc's version, or undefined when it is missing. */
  runc: string | undefined;
  /** runsc's version, or undefined when gVisor is not installed. */
  runsc: string | undefined;
  /** What keeps runs from working here, each with its fix. */
  problems: string[];
}

export async function runtimeVersion(host: OciHost, runtime: OciRuntime): Promise<string | undefined> {
  const { file, args } = runtimeInvocation(runtime, { kind: 'version' }, host);
  try {
    const { stdout } = await run(file, args, { timeout: 10_000 });
    const version = /version\s+(\S+)/.exec(stdout)?.[1];
    return version ? `${runtime} ${version}` : undefined;
  } catch {
    return undefined;
  }
}

export async function checkHost(host: OciHost): Promise<HostCheck> {
  const problems: string[] = [];
  const root = process.getuid?.() === 0;
  if (!root) problems.push('the oci backend runs as root (it creates cgroups and mounts)');
  const cgroupRoot = host.layout.cgroupRoot;
  const cgroups = existsSync(join(cgroupRoot, 'memory', 'memory.limit_in_bytes'))
    ? `v1, memory controller at ${join(cgroupRoot, 'memory')}`
    : existsSync(join(cgroupRoot, 'cgroup.controllers'))
      ? `v2 at ${cgroupRoot}`
      : undefined;
  if (!cgroups) problems.push(`no cgroup memory controller under ${cgroupRoot}`);
  const [runc, runsc] = await Promise.all([runtimeVersion(host, 'runc'), runtimeVersion(host, 'runsc')]);
  if (!runc) problems.push(`runc is missing at ${host.binaries.runc} (apt-get install runc)`);
  const runtimes = [runc, runsc].filter((v): v is string => v !== undefined);
  return { root, cgroups, runtimes, runc, runsc, problems };
}
