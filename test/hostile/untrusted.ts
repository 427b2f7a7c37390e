/**
 * Where the hostile tier runs untrusted code (issue 21): a backend (Docker, oci, Kubernetes), under
 * runc or gVisor, in a cold sandbox or a warm pool's, as a one-shot run or as an exec in a session,
 * always through the gateway's service and its policy, as a real request would be.
 *
 * CI runs each case once per backend in the configurations `configs()` gives (the bombs in
 * `bombConfigs()`'s); with SANDPIT_RELIABILITY=full (`npm run test:reliability`) both give the
 * whole matrix.
 */
import type { RunRequestInput, RunResult } from '../../src/api/run.js';
import type { SandpitService } from '../../src/gateway/service.js';

export type BackendName = 'docker' | 'oci' | 'kubernetes';

export interface HostileConfig {
  backend: BackendName;
  /** gVisor: runsc on Docker and oci, the `gvisor` RuntimeClass on Kubernetes; else runc. */
  gvisor: boolean;
  /** Served by a warm pool's pre-started sandbox (Docker and Kubernetes keep pools; oci does not). */
  warm: boolean;
  /** A one-shot run, or an exec in a session made for it (and deleted after). */
  path: 'run' | 'session';
}

/** What a program's run (or exec) came to, as the gateway answers it. */
export type Ran = Omit<RunResult, 'runId'>;

/** A request's fields a case may set; the template defaults to python. */
export type UntrustedRequest = Omit<RunRequestInput, 'runtime' | 'runtimeClassName'>;

export interface Untrusted {
  config: HostileConfig;
  /** e.g. `docker, runsc, warm, session`: the suffix of every describe() that uses this target. */
  label: string;
  /** The gateway's service over the backend (the path every MCP tool and REST route takes). */
  service: SandpitService;
  /** What the gateway and the operator behind this target hold that no sandbox may see, by name. */
  secrets: Readonly<Record<string, string>>;
  /** Runs `request` as untrusted code in this configuration, to its result. */
  run(request: UntrustedRequest): Promise<Ran>;
  /** This target's sandboxes (containers, bundles, pods, SandboxRuns, Sandboxes) that exist now. */
  leftovers(): Promise<string[]>;
  close(): Promise<void>;
}

/** Whether this run asks for the whole matrix (`npm run test:reliability`). */
export const FULL_MATRIX = process.env.SANDPIT_RELIABILITY === 'full';

export function configLabel(c: HostileConfig): string {
  const runtime = c.gvisor ? (c.backend === 'kubernetes' ? 'gvisor' : 'runsc') : 'runc';
  return [c.backend, runtime, c.warm ? 'warm' : 'cold', c.path].join(', ');
}

/** The configurations this run tries on `backend`: the CI set, or every combination with FULL_MATRIX. */
export function configs(backend: BackendName): HostileConfig[] {
  // oci keeps no pools: its runs and sessions are always cold.
  const pools = backend !== 'oci';
  if (FULL_MATRIX) {
    const out: HostileConfig[] = [];
    for (const gvisor of [false, true])
      for (const warm of pools ? [false, true] : [false])
        for (const path of ['run', 'session'] as const) out.push({ backend, gvisor, warm, path });
    return out;
  }
  return [
    { backend, gvisor: false, warm: pools, path: 'run' },
    { backend, gvisor: false, warm: pools, path: 'session' },
    { backend, gvisor: true, warm: false, path: 'run' },
  ];
}

/**
 * The configurations the resource bombs run in: in CI, configs() less gVisor's (its escape and leak
 * cases are the runsc subset); a configuration's bombs cost three or four sandboxes, and gVisor's
 * take the longest. The whole matrix has them all.
 */
export function bombConfigs(backend: BackendName): HostileConfig[] {
  return configs(backend).filter((c) => FULL_MATRIX || !c.gvisor);
}

/** Makes the targets of one backend: what they share (a backend, an operator) is made once, and closed by close(). */
export interface Targets {
  target(config: HostileConfig): Promise<Untrusted>;
  close(): Promise<void>;
}
