/**
 * The command lines of the two OCI runtimes, runc (Debian's /usr/sbin/runc) and runsc (gVisor),
 * as the OCI backend runs them: each with sandpit's own state root. Pure.
 *
 * runsc runs with the ptrace platform (KVM inside this VM never finishes a run, notes), without its
 * own network stack (`--network=none`: the sandbox has lo only, as under runc), and applies
 * sandpit's seccomp profile inside the sandbox (`--oci-seccomp`), as the Docker backend's runsc
 * registration does (scripts/docker-engine.sh).
 */
import type { OciLayout, OciRuntime } from './layout.js';
import { stateRoot } from './layout.js';

export interface RuntimeBinaries {
  runc: string;
  runsc: string;
}

export const DEFAULT_BINARIES: RuntimeBinaries = { runc: '/usr/sbin/runc', runsc: '/usr/bin/runsc' };

export const RUNSC_FLAGS = ['--platform=ptrace', '--network=none', '--oci-seccomp'] as const;

export type RuntimeCommand =
  | { kind: 'run'; bundle: string; id: string }
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
  const global = ['--root', stateRoot(where.layout, runtime), ...(runtime === 'runsc' ? RUNSC_FLAGS : [])];
  return { file, args: [...global, ...commandArgs(runtime, command)] };
}

function commandArgs(runtime: OciRuntime, command: Exclude<RuntimeCommand, { kind: 'version' }>): string[] {
  switch (command.kind) {
    case 'run':
      // runc keeps the stopped container (and its cgroup, where OOM is read) until `delete`; runsc
      // has no --keep, and removes it when the sandbox ends.
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
