/**
 * What the contract cases need from a backend under test: the gateway's service over it (the
 * path every MCP tool and REST route takes), a way to see the sandboxes it made, and the few
 * facts in which the backends are allowed to differ (stated here, so the cases say so too).
 */
import type { RunRequestInput, RunResult } from '../../src/api/run.js';
import type { OutputChunk } from '../../src/runner/capture.js';
import type { BackendHealth, RunExecution, SandboxBackend, StartOptions } from '../../src/backends/types.js';
import type { Principal } from '../../src/gateway/principal.js';
import { SandpitService } from '../../src/gateway/service.js';
import { silentLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import type { EffectiveSpec } from '../../src/policy/evaluate.js';
import { createPolicy, type Policy } from '../../src/policy/policy.js';

/** Output limit of the contract policy: a 2 KiB live head and a 2 KiB tail per stream. */
export const OUTPUT_BYTES = 4096;

/** The contract policy. The Kubernetes operator is started with the same sandbox settings. */
export function contractPolicy(allowedRuntimes: readonly string[]): Policy {
  return createPolicy({
    imageAllowlist: ['sandpit/*'],
    allowedRuntimes,
    ceilings: { outputBytes: OUTPUT_BYTES, timeoutSeconds: 30 },
  });
}

/** The `sandbox:` config section that gives the operator the contract policy. */
export const CONTRACT_SANDBOX_CONFIG = {
  imageAllowlist: ['sandpit/*'],
  maxOutputBytes: OUTPUT_BYTES,
  timeoutSeconds: 30,
};

export const PRINCIPAL: Principal = { id: 'contract-tests', name: 'contract@tests', scope: {} };

/** Delegates to a backend and counts the runs it was asked to start. */
export class CountingBackend implements SandboxBackend {
  readonly inner: SandboxBackend;
  starts = 0;

  constructor(inner: SandboxBackend) {
    this.inner = inner;
  }

  get name(): SandboxBackend['name'] {
    return this.inner.name;
  }

  get sessions(): SandboxBackend['sessions'] {
    return this.inner.sessions;
  }

  get runs(): SandboxBackend['runs'] {
    return this.inner.runs;
  }

  start(spec: EffectiveSpec, options: StartOptions): RunExecution {
    this.starts++;
    return this.inner.start(spec, options);
  }

  health(): Promise<BackendHealth> {
    return this.inner.health();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

export interface ContractTarget {
  name: 'docker' | 'kubernetes' | 'oci';
  service: SandpitService;
  backend: CountingBackend;
  /** Sandboxes (containers, pods) that exist for this run, in any state. */
  sandboxesOf(runId: string): Promise<string[]>;
  /** Waits until the run has no sandbox left; throws after `timeoutMs`. */
  waitSandboxesGone(runId: string, timeoutMs: number): Promise<void>;
  /** Every sandbox object of this target right now (cold containers; SandboxRuns and pods). */
  sandboxCount(): Promise<number>;
  /** The phase of the run's own record outside the gateway, where the backend keeps one. */
  recordPhase?(runId: string): Promise<string | undefined>;
  /** False on Kubernetes < 1.32: the pod log is one stream, reported as stdout. */
  separateStderr: boolean;
  /**
   * Whether output streams while the program runs under gVisor. False on Kubernetes: there the
   * output is the pod log, the runner's unframed stdout and stderr, which gVisor lets the program
   * open through /proc/1/fd. So the runner holds neither in any descriptor while the program runs,
   * and writes the capped output once the program has ended (images/runner/sandpit-runner.c, the
   * header's "In --plain mode"). Docker's output comes in frames with a per-run key, which the
   * program cannot forge, so it streams under gVisor as it does under runc.
   */
  liveOutputUnderGvisor: boolean;
  /** gVisor here: the runtime (Docker) or RuntimeClass (Kubernetes) a request names, and a service whose policy allows it. */
  gvisor: { runtime: string; service: SandpitService };
  /**
   * Waits until the session's sandbox is removed (its container; its pod), and nothing else is
   * left; throws after `timeoutMs`. The contract's other allowed session difference: Kubernetes
   * keeps the operator's record of a session that ended by itself (its Sandbox, until its
   * ttlSecondsAfterFinished), which must then say `kept`; Docker keeps no record.
   */
  waitSessionGone(
    sessionId: string,
    timeoutMs: number,
    kept?: { phase: string; reason: string },
  ): Promise<void>;
  /**
   * How late an idle session may end after its idle time: the contract's one allowed session
   * difference. Docker's gateway expires it on the dot; Kubernetes' operator from the session
   * Lease's renewTime, which the gateway writes at most every 10 s, plus 10 s of slack.
   */
  idlePrecisionMs: number;
  /** Wall time a run may take on top of its own duration here (container start, scheduling, status round trips). */
  overheadMs: number;
  /**
   * How long an idempotency key (requestId) names its run: the allowed difference. `record`
   * (Kubernetes): as long as its SandboxRun, for every gateway replica; `process` (Docker): as long
   * as the gateway process that ran it, which alone knows the key.
   */
  keys: 'record' | 'process';
  /** The run records outside the gateway right now (SandboxRuns), where the backend keeps them. */
  runRecordCount?(): Promise<number>;
  /** A service over a new backend of the same target: another gateway replica, where there can be one. */
  replica?(): SandpitService;
}

export function createService(backend: CountingBackend, policy: Policy): SandpitService {
  return new SandpitService({
    backend,
    policy,
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 4, maxQueued: 16 },
  });
}

export interface Observed {
  result: RunResult;
  chunks: { at: number; chunk: OutputChunk }[];
  resultAt: number;
}

/** Runs a request through the service, recording every live chunk with its arrival time. */
export async function observeRun(
  target: ContractTarget,
  request: RunRequestInput,
  onStarted?: (runId: string) => void,
): Promise<Observed> {
  const chunks: Observed['chunks'] = [];
  const handle = await target.service.runs.start(request, PRINCIPAL, {
    onOutput: (chunk) => chunks.push({ at: performance.now(), chunk }),
  });
  onStarted?.(handle.runId);
  const result = await handle.result;
  return { result, chunks, resultAt: performance.now() };
}

export function liveText(o: Observed): string {
  return Buffer.concat(o.chunks.map((c) => c.chunk.data)).toString('utf8');
}
