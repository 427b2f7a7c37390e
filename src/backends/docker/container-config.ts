/**
 * The Docker rendering of an effective spec: a pure function, tested field by field. Every
 * container gets the full hardening whether it serves a cold run or waits in a warm pool.
 */
import type Docker from 'dockerode';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { RunnerMode, SandboxShape } from '../../policy/shape.js';
import { LABELS, MANAGED_BY } from './labels.js';
import { EGRESS_SOCKET_DIR, preloadFlags, RUNNER_PATH } from '../../runner/protocol.js';
import {
  egressDirOf,
  isGvisor,
  pidsLimit,
  RESOLVER_OPTIONS,
  sandboxRlimits,
  sandboxTmpfs,
  SANDBOX_HOSTNAME,
  SANDBOX_USER,
  seccompProfileFor,
  SHM_BYTES,
  UNROUTABLE_NAMESERVER,
} from '../hardening.js';

export { RUNSC_HOST_PIDS, SANDBOX_USER, UNROUTABLE_NAMESERVER } from '../hardening.js';

/** sandpit's seccomp profile as the Engine API takes it; gVisor applies it inside (runsc --oci-seccomp). */
const SECCOMP = {
  default: `seccomp=${JSON.stringify(seccompProfileFor({ runtime: undefined }))}`,
  runsc: `seccomp=${JSON.stringify(seccompProfileFor({ runtime: 'runsc' }))}`,
};

/**
 * The runtime an egress sandbox runs in where it asked for runsc: runsc with --host-uds=open, so
 * that it may connect to the proxy's socket mounted into it (scripts/docker-engine.sh registers
 * it; every other sandbox keeps runsc, which reaches no host socket).
 */
export const RUNSC_EGRESS = 'runsc-egress';

export interface ContainerOptions {
  name: string;
  runId?: string;
  kind: 'run' | 'pool' | 'session';
  owner: string;
  /** Epoch ms after which the reaper may remove the container regardless of its owner. */
  expiresAt?: number;
  /** `session`: the runner serves a stream of requests (`--session`) on a stdin that outlives attaches. */
  mode?: RunnerMode;
  session?: SessionLabels;
  /** An egress sandbox's gate directory on the host (it holds the proxy's socket), mounted read-only. */
  egressDir?: string | undefined;
  /** A pre-warmed pool's container: the variables its runner starts the job's interpreter with. */
  preloadEnv?: EffectiveSpec['env'] | undefined;
}

export interface SessionLabels {
  sessionId?: string | undefined;
  principal?: string | undefined;
  /** The gateway instance that adopts the session after a restart (none: it ends with its owner). */
  instance?: string | undefined;
  /** The runner exits if no session is opened within this time (an unclaimed pool container). */
  openWithinSeconds: number;
  /** The runner's channel key (LABELS.channelKey). */
  key: Buffer;
}

export function buildContainerConfig(
  shape: SandboxShape,
  options: ContainerOptions,
): Docker.ContainerCreateOptions {
  const { limits } = shape;
  const runsc = isGvisor(shape);
  const session = options.mode === 'session' ? options.session : undefined;
  const egressDir = egressDirOf(shape, options.egressDir);
  return {
    name: options.name,
    Image: shape.image,
    Entrypoint: [RUNNER_PATH],
    Cmd: session
      ? ['--session', '--open-within', String(session.openWithinSeconds)]
      : options.preloadEnv
        ? preloadFlags(options.preloadEnv)
        : [],
    User: SANDBOX_USER,
    WorkingDir: shape.workdir,
    Env: [],
    Labels: {
      [LABELS.managedBy]: MANAGED_BY,
      [LABELS.kind]: options.kind,
      [LABELS.owner]: options.owner,
      ...(options.runId ? { [LABELS.run]: options.runId } : {}),
      ...(shape.template ? { [LABELS.template]: shape.template } : {}),
      ...(options.expiresAt ? { [LABELS.expires]: String(options.expiresAt) } : {}),
      ...(session ? sessionLabels(session) : {}),
      ...(egressDir ? { [LABELS.egressDir]: egressDir } : {}),
    },
    AttachStdin: true,
    OpenStdin: true,
    // A run's stdin closes with its one attach. A session's must outlive the gateway's attach (the
    // engine would close it when that gateway dies), so that a restarted gateway can re-attach.
    StdinOnce: !session,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    // A run's runner is PID 1 with no SIGTERM handler (the kernel ignores the signal for it): a stop
    // (`docker stop`, the engine's own shutdown) would wait out the 10 s grace, then kill it anyway.
    // A session's runner ends on SIGTERM, saying it was stopped.
    ...(session ? {} : { StopSignal: 'SIGKILL' }),
    Hostname: SANDBOX_HOSTNAME,
    HostConfig: {
      NetworkMode: 'none',
      Dns: [UNROUTABLE_NAMESERVER],
      DnsOptions: [...RESOLVER_OPTIONS],
      DnsSearch: [],
      Memory: limits.memoryBytes,
      MemorySwap: limits.memoryBytes,
      NanoCpus: limits.cpuMilli * 1_000_000,
      PidsLimit: pidsLimit(shape),
      Ulimits: sandboxRlimits(shape).map((r) => ({ Name: r.name, Soft: r.soft, Hard: r.hard })),
      ReadonlyRootfs: true,
      Tmpfs: Object.fromEntries(sandboxTmpfs(shape).map((m) => [m.path, m.options.join(',')])),
      ShmSize: SHM_BYTES,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges', runsc ? SECCOMP.runsc : SECCOMP.default],
      Privileged: false,
      IpcMode: 'private',
      Init: false,
      AutoRemove: false,
      // Output travels over the attach stream only: nothing the sandbox prints is written to host disk.
      LogConfig: { Type: 'none', Config: {} },
      // The proxy's socket is the one thing on the host an egress sandbox reaches; read-only, so it
      // can connect there but bind nothing.
      ...(egressDir
        ? {
            Mounts: [{ Type: 'bind' as const, Source: egressDir, Target: EGRESS_SOCKET_DIR, ReadOnly: true }],
          }
        : {}),
      ...(shape.runtime ? { Runtime: runsc && egressDir ? RUNSC_EGRESS : shape.runtime } : {}),
    },
  };
}

function sessionLabels(s: SessionLabels): Record<string, string> {
  return {
    [LABELS.mode]: 'session',
    [LABELS.channelKey]: s.key.toString('hex'),
    ...(s.sessionId ? { [LABELS.session]: s.sessionId } : {}),
    ...(s.principal ? { [LABELS.principal]: s.principal } : {}),
    ...(s.instance ? { [LABELS.instance]: s.instance } : {}),
  };
}
