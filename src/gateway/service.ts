/**
 * The gateway's use cases: start, get and cancel runs, list templates, health. Every transport
 * (CLI, MCP, HTTP) calls these, so behaviour cannot drift between them.
 */
import { randomBytes } from 'node:crypto';
import type { RunResult } from '../api/run.js';
import { RunRequestSchema } from '../api/run.js';
import { parseInput } from '../api/validate.js';
import type { OutputChunk } from '../backends/output.js';
import { buildResult } from '../backends/result.js';
import type { BackendHealth, SandboxBackend } from '../backends/types.js';
import { auditRecord, writeAudit } from '../observability/audit.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { evaluate, type EffectiveSpec } from '../policy/evaluate.js';
import type { Policy } from '../policy/policy.js';
import { AsyncQueue } from '../shared/async-queue.js';
import { AppError, policyDenied, toAppError } from '../shared/errors.js';
import { formatCpu, formatSize } from '../shared/quantity.js';
import { Admission, type AdmissionOptions } from './admission.js';
import type { Principal } from './principal.js';
import { RunStore, type RunRecord } from './run-store.js';

export interface ServiceDeps {
  backend: SandboxBackend;
  policy: Policy;
  logger: Logger;
  metrics: Metrics;
  admission: AdmissionOptions;
}

export interface RunHandle {
  runId: string;
  output: AsyncIterable<OutputChunk>;
  result: Promise<RunResult>;
}

export interface TemplateInfo {
  name: string;
  description: string;
  image: string;
  aliases: string[];
  fileName: string;
  defaults: { cpu: string; memory: string; timeoutSeconds: number; pids: number };
}

export function newRunId(): string {
  return `run-${randomBytes(6).toString('hex')}`;
}

export class SandpitService {
  private readonly deps: ServiceDeps;
  private readonly admission: Admission;
  private readonly runs = new RunStore();

  constructor(deps: ServiceDeps) {
    this.deps = deps;
    this.admission = new Admission(deps.admission);
  }

  get policy(): Policy {
    return this.deps.policy;
  }

  /** Validates and evaluates without running anything: throws INVALID_REQUEST or POLICY_DENIED. */
  plan(input: unknown, principal: Principal): EffectiveSpec {
    const request = parseInput(RunRequestSchema, input, 'run request');
    const evaluation = evaluate(request, this.deps.policy, principal.scope);
    if (!evaluation.ok) throw policyDenied(evaluation.violations);
    return evaluation.spec;
  }

  /**
   * Starts a run once a slot is free. Rejects (before any sandbox exists) with INVALID_REQUEST,
   * POLICY_DENIED or BUSY; afterwards every outcome is a result.
   */
  async startRun(input: unknown, principal: Principal, signal?: AbortSignal): Promise<RunHandle> {
    let spec: EffectiveSpec;
    let release: () => void;
    try {
      spec = this.plan(input, principal);
      this.deps.metrics.queuedRuns.inc();
      try {
        release = await this.admission.acquire(principal.name, principal.maxConcurrentRuns, signal);
      } finally {
        this.deps.metrics.queuedRuns.dec();
      }
    } catch (e) {
      const err = toAppError(e);
      this.deps.metrics.rejected.inc({ code: err.code });
      this.deps.logger.info(
        { principal: principal.name, errorCode: err.code, violations: err.violations },
        'run refused',
      );
      throw err;
    }
    return this.launch(spec, principal, release, signal);
  }

  /** Starts a run and waits for its result. */
  async run(input: unknown, principal: Principal, signal?: AbortSignal): Promise<RunResult> {
    const handle = await this.startRun(input, principal, signal);
    return handle.result;
  }

  private launch(
    spec: EffectiveSpec,
    principal: Principal,
    release: () => void,
    signal?: AbortSignal,
  ): RunHandle {
    const runId = newRunId();
    const controller = new AbortController();
    const forward = (): void => controller.abort(signal?.reason);
    if (signal?.aborted) forward();
    else signal?.addEventListener('abort', forward, { once: true });
    const { backend, logger, metrics } = this.deps;
    const startedAt = Date.now();
    let settle!: () => void;
    const record: RunRecord = {
      runId,
      principal: principal.name,
      createdAt: startedAt,
      controller,
      result: undefined,
      settled: new Promise<void>((r) => (settle = r)),
      live: { stdout: '', stderr: '' },
    };
    this.runs.add(record);
    metrics.activeRuns.inc({ backend: backend.name });
    logger.debug(
      { runId, principal: principal.name, template: spec.template, image: spec.image },
      'run started',
    );

    const execution = backend.start(spec, { runId, signal: controller.signal, principal: principal.name });
    const output = new AsyncQueue<OutputChunk>();
    void (async () => {
      for await (const chunk of execution.output) {
        this.runs.appendLive(record, chunk);
        output.push(chunk);
      }
      output.end();
    })();
    // The record of a run whose sandbox failed: readable by get_run like any other outcome.
    const failed = (err: AppError): RunResult =>
      buildResult({
        runId,
        spec,
        facts: { exitCode: null, timedOut: false, oomKilled: false, cancelled: false, failure: err.message },
        startedAt,
        finishedAt: Date.now(),
        backend: backend.name,
      });
    const result = execution.result
      .catch((e: unknown) => {
        const err = toAppError(e, 'BACKEND_ERROR');
        logger.warn({ runId, errorCode: err.code, err: err.message }, 'run failed in the backend');
        if (err.code !== 'BACKEND_ERROR') throw err;
        return failed(err);
      })
      .then(
        (res) => {
          this.runs.finish(record, res);
          metrics.runs.inc({ backend: backend.name, phase: res.phase, reason: res.reason ?? '' });
          metrics.runDuration.observe(
            { backend: backend.name, served: res.served ?? 'cold' },
            res.durationMs / 1000,
          );
          writeAudit(logger, auditRecord(spec, res, principal.name, backend.name));
          return res;
        },
        (e: unknown) => {
          const err = toAppError(e);
          this.runs.finish(record, failed(err));
          throw err;
        },
      )
      .finally(() => {
        signal?.removeEventListener('abort', forward);
        metrics.activeRuns.dec({ backend: backend.name });
        release();
        settle();
      });
    return { runId, output, result };
  }

  /** The run's current state; a principal sees only its own runs. */
  getRun(runId: string, principal: Principal): RunResult {
    const record = this.find(runId, principal);
    if (record.result) return record.result;
    return {
      runId,
      phase: 'Running',
      exitCode: null,
      timedOut: false,
      stdout: record.live.stdout,
      stderr: record.live.stderr,
      truncated: false,
      stdoutBytes: Buffer.byteLength(record.live.stdout),
      stderrBytes: Buffer.byteLength(record.live.stderr),
      binaryOutput: false,
      durationMs: Date.now() - record.createdAt,
      backend: this.deps.backend.name,
      createdAt: new Date(record.createdAt).toISOString(),
    };
  }

  /** Cancels a live run and waits until its sandbox is stopped; a finished run is returned as it is. */
  async cancelRun(runId: string, principal: Principal): Promise<RunResult> {
    const record = this.find(runId, principal);
    if (!record.result) {
      record.controller.abort(new AppError('CANCELLED', 'the run was cancelled'));
      await record.settled;
    }
    return this.getRun(runId, principal);
  }

  private find(runId: string, principal: Principal): RunRecord {
    const record = this.runs.get(runId);
    if (!record || record.principal !== principal.name) {
      throw new AppError('NOT_FOUND', `no run ${runId}`, {
        hint: 'runs are kept for a while after they end; check the id',
      });
    }
    return record;
  }

  listTemplates(principal: Principal): TemplateInfo[] {
    const { policy } = this.deps;
    const allowed = principal.scope.templates;
    return policy.templates
      .filter((t) => !allowed || allowed.includes(t.name))
      .map((t) => ({
        name: t.name,
        description: t.description,
        image: t.image,
        aliases: [...t.aliases],
        fileName: t.fileName,
        defaults: {
          cpu: formatCpu(policy.ceilings.cpuMilli),
          memory: formatSize(Math.min(t.defaults.memoryBytes ?? Infinity, policy.ceilings.memoryBytes)),
          timeoutSeconds: Math.min(t.defaults.timeoutSeconds ?? Infinity, policy.ceilings.timeoutSeconds),
          pids: Math.min(t.defaults.pids ?? Infinity, policy.ceilings.pids),
        },
      }));
  }

  async health(): Promise<BackendHealth & { running: number; queued: number }> {
    const health = await this.deps.backend.health();
    return { ...health, ...this.admission.stats };
  }

  /** Cancels every live run and waits for the backend to clean up. */
  async shutdown(): Promise<void> {
    for (const record of this.runs.active())
      record.controller.abort(new AppError('CANCELLED', 'the server is shutting down'));
    await Promise.all(this.runs.active().map((r) => r.settled));
    await this.deps.backend.close();
  }
}
