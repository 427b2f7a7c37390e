/**
 * The command lines of the two OCI runtimes, runc (Debian's /usr/sbin/runc) and runsc (gVisor),
 * as the OCI backend runs them: each with sandpit's own state root. Pure.
 *
 * runsc runs with the ptrace platform (KVM inside this VM never finishes a run, notes), without its
 * own network stack (`--network=none`: the sandbox has lo only, as under runc), and applies
 * sandpit's seccomp profile inside the sandbox (`--oci-seccomp`), as the Docker backend's runsc
 * registration does (scripts/docker-engine.sh). An egress sandbox's run under runsc adds
 * `--host-uds=open` (what Docker's `runsc-egress` runtime adds): it lets the sandbox connect to
 * host Unix sockets that are mounted into it (not create one), and the only one mounted is its
 * egress proxy's socket. Every other sandbox runs without it, so it reaches no host socket even if
 * one were ever mounted into it.
 */
import type { OciLayout, OciRuntime } from './layout.js';
import { stateRoot } from './layout.js';

export interface RuntimeBinaries {
  runc: string;
  runsc: string;
}

export const DEFAULT_BINARIES: RuntimeBinaries = { runc: '/usr/sbin/runc', runsc: '/usr/bin/runsc' };

export const RUNSC_FLAGS = ['--platform=ptrace', '--network=none', '--oci-seccomp'] as const;
/** runsc's flag for an egress sandbox: it may connect to the host socket mounted into it. */
export const RUNSC_EGRESS_FLAG = '--host-uds=open';

export type RuntimeCommand =
  /** `egress`: the sandbox's way out is the proxy's socket mounted into it (runsc: RUNSC_EGRESS_FLAG). */
  | { kind: 'run'; bundle: string; id: string; egress?: boolean }
  | { kind: 'kill'; id: string }
  | { kind: 'delete'; id: string }
  | { kind: 'list' }
  | { kind: 'version' };

export interface Invocation {
  file: string;
  args: string[];
}

export function runtimeInvocation(
  runtime: OciRuntime,
  command: RuntimeCommand,
  where: { layout: OciLayout; binaries: RuntimeBinaries },
): Invocation {
  const file = where.binaries[runtime];
  if (command.kind === 'version') return { file, args: ['--version'] };
  const global = [
    '--root',
    stateRoot(where.layout, runtime),
    ...(runtime === 'runsc' ? runscFlags(command) : []),
  ];
  return { file, args: [...global, ...commandArgs(runtime, command)] };
}

function runscFlags(command: RuntimeCommand): string[] {
  return command.kind === 'run' && command.egress ? [...RUNSC_FLAGS, RUNSC_EGRESS_FLAG] : [...RUNSC_FLAGS];
}

function commandArgs(runtime: OciRuntime, command: Exclude<RuntimeCommand, { kind: 'version' }>): string[] {
  switch (command.kind) {
    case 'run':
      // runc keeps the stopped container (and its cgroup, where OOM is read) until `delete`; runsc
      // has no --keep, and removes the cgroups it made when the sandbox ends (not the memory
      // cgroup the backend made for it, memory-cgroup.ts).
      return runtime === 'runc'
        ? ['run', '--keep', '--bundle', command.bundle, command.id]
        : ['run', '--bundle', command.bundle, command.id];
    case 'kill':
      return ['kill', command.id, 'KILL'];
    case 'delete':
      return ['delete', '--force', command.id];
    case 'list':
      return ['list', '--format', 'json'];
  }
}
