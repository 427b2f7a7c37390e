/**
 * The run use cases: plan, start, get and cancel one-shot runs. Every transport (CLI, MCP, HTTP)
 * calls these, so behaviour cannot drift between them. The process that follows a run answers for
 * it from memory (its live output, its whole result); where the backend records runs for every
 * process (Kubernetes: the SandboxRun), any other process answers from that record.
 */
import { randomBytes } from 'node:crypto';
import { classify, failedFacts } from '../api/outcome.js';
import { buildResult } from '../api/result.js';
import { RunRequestSchema, type RunRequest, type RunResult } from '../api/run.js';
import { parseInput } from '../api/validate.js';
import type { RecordedTask, RunExecution } from '../backends/types.js';
import { buildRunAudit } from '../observability/audit.js';
import { evaluate, type EffectiveSpec } from '../policy/evaluate.js';
import { onAbort } from '../shared/abort.js';
import { AppError, policyDenied, toAppError } from '../shared/errors.js';
import type { GatewayDeps } from './deps.js';
import { keyedRequest, RunKeys, type Keyed } from './idempotency.js';
import { LiveOutput, type LiveChunk } from './live-output.js';
import { followRecord } from './run-follow.js';
import type { RunHandle, StartRunOptions } from './run-handle.js';
import type { Principal } from './principal.js';
import { RunStore, type HistoryOptions, type RunRecord } from './run-store.js';
import { lostRunRecord } from './run-journal.js';

/** Why a run lost with its process failed, as the next process audits it. */
const LOST_WITH_ITS_PROCESS = 'the sandpit process that ran it ended before it did, and its sandbox with it';

interface Launch {
  spec: EffectiveSpec;
  principal: Principal;
  release: () => void;
  options: StartRunOptions;
  runId: string;
  keyed: Keyed | undefined;
}

interface LaunchedRun {
  execution: RunExecution;
  /** Settles once every chunk of output has been handed on. */
  relayed: Promise<void>;
  record: RunRecord;
  spec: EffectiveSpec;
  keyed: Keyed | undefined;
}

export function newRunId(): string {
  return `run-${randomBytes(6).toString('hex')}`;
}

export class RunUseCases {
  private readonly deps: GatewayDeps;
  private readonly store: RunStore;
  /** The idempotency keys (requestId) of this process. */
  private readonly keys: RunKeys;

  constructor(deps: GatewayDeps, history: Partial<HistoryOptions> = {}) {
    this.deps = deps;
    this.store = new RunStore(history, (runId) => deps.backend.files?.release(runId));
    this.keys = new RunKeys(this.store, () => deps.backend.runs !== undefined);
  }

  /** Validates and evaluates without running anything: throws INVALID_REQUEST or POLICY_DENIED. */
  plan(input: unknown, principal: Principal): EffectiveSpec {
    return this.admit(input, principal).spec;
  }

  private admit(input: unknown, principal: Principal): { request: RunRequest; spec: EffectiveSpec } {
    const request = parseInput(RunRequestSchema, input, 'run request');
    const evaluation = evaluate(request, this.deps.policy, principal.scope);
    if (!evaluation.ok) throw policyDenied(evaluation.violations);
    return { request, spec: evaluation.spec };
  }

  /**
   * Starts a run once a slot is free. Rejects (before any sandbox exists) with INVALID_REQUEST,
   * POLICY_DENIED, CONFLICT, AUDIT_UNAVAILABLE or BUSY; afterwards every outcome is a result. A
   * request with a `requestId` the principal used before gets that run (idempotency.ts).
   */
  async start(input: unknown, principal: Principal, options: StartRunOptions = {}): Promise<RunHandle> {
    const { metrics, slots, audit } = this.deps;
    let spec: EffectiveSpec;
    let keyed: Keyed | undefined;
    let release: () => void;
    try {
      const admitted = this.admit(input, principal);
      spec = admitted.spec;
      keyed = keyedRequest(principal.id, admitted.request);
      const repeat = keyed && (await this.keys.find(keyed, principal.id));
      if (repeat) return this.follow(repeat, options);
      audit.assertAvailable();
      this.deps.rates.admit(principal);
      metrics.queuedRuns.inc();
      try {
        release = await slots.acquire(principal, options.signal);
      } finally {
        metrics.queuedRuns.dec();
      }
    } catch (e) {
      keyed?.started?.();
      throw this.refused(e, principal);
    }
    const runId = keyed ? this.keys.runIdFor(keyed, newRunId) : newRunId();
    try {
      return this.launch({ spec, principal, release, options, runId, keyed });
    } finally {
      keyed?.started?.();
    }
  }

  private refused(e: unknown, principal: Principal): AppError {
    const err = toAppError(e);
    this.deps.metrics.rejected.inc({ code: err.code });
    this.deps.logger.info(
      { principal: principal.name, errorCode: err.code, violations: err.violations },
      'run refused',
    );
    return err;
  }

  /**
   * Starts a run nobody waits for (REST `?wait=false`) and answers with its state once every
   * gateway process can read it: on Kubernetes, once its SandboxRun exists, so that get_run on
   * another replica finds it. How it ends is read with get().
   */
  async submit(input: unknown, principal: Principal): Promise<RunResult> {
    const handle = await this.start(input, principal, { detached: true });
    void handle.result.catch(() => undefined);
    await handle.recorded;
    return this.get(handle.runId, principal);
  }

  /** Starts a run and waits for its result. */
  async run(input: unknown, principal: Principal, options: StartRunOptions = {}): Promise<RunResult> {
    const handle = await this.start(input, principal, options);
    const result = await handle.result;
    handle.delivered();
    return result;
  }

  private launch(l: Launch): RunHandle {
    const { backend, logger, metrics } = this.deps;
    const { spec, principal, release, options, runId, keyed } = l;
    const controller = new AbortController();
    const detach = onAbort(options.signal, () => controller.abort(options.signal?.reason));
    let settle!: () => void;
    const record: RunRecord = {
      runId,
      owner: principal.id,
      createdAt: Date.now(),
      subject: spec,
      controller,
      result: undefined,
      settled: new Promise<void>((r) => (settle = r)),
      live: new LiveOutput(),
      followers: new Set(),
      requestDigest: keyed?.digest,
    };
    this.store.add(record);
    this.remember(record, spec, principal);
    if (keyed) this.keys.recorded(keyed, runId);
    metrics.activeRuns.inc({ backend: backend.name });
    logger.debug(
      { runId, principal: principal.name, template: spec.template, image: spec.image },
      'run started',
    );
    const execution = backend.start(spec, {
      runId,
      signal: controller.signal,
      principal: principal.name,
      owner: principal.id,
      namespace: principal.namespace,
      ...(keyed ? { requestDigest: keyed.digest } : {}),
      ...(options.task ? { task: true } : {}),
    });
    if (options.detached || options.task) record.release = execution.release;
    const relayed = this.relay(execution, record, options.onOutput);
    const result = this.outcome({ execution, relayed, record, spec, keyed }, principal).finally(() => {
      detach();
      metrics.activeRuns.dec({ backend: backend.name });
      release();
      settle();
      // Its own record (if it has one) in the file first: only then may the journal let go of it.
      void this.deps.audit.written().then(() => this.deps.runJournal.forget(runId));
    });
    return {
      runId,
      result,
      delivered: () => this.store.delivered(runId),
      recorded: execution.recorded ?? Promise.resolve(),
    };
  }

  /** Remembers the run in the journal, with the record it gets if this process dies before it ends. */
  private remember(record: RunRecord, spec: EffectiveSpec, principal: Principal): void {
    const { backend } = this.deps;
    const lost = buildResult({
      runId: record.runId,
      subject: spec,
      outcome: classify(failedFacts(LOST_WITH_ITS_PROCESS)),
      startedAt: record.createdAt,
      finishedAt: record.createdAt,
      backend: backend.name,
    });
    this.deps.runJournal.remember({
      runId: record.runId,
      startedAt: record.createdAt,
      record: buildRunAudit({
        spec,
        outcome: lost,
        principal: principal.name,
        backend: backend.name,
        time: new Date(record.createdAt),
      }),
    });
  }

  /**
   * Audits the runs that sandpit processes now gone left under way (the journal's), each once:
   * Failed, BackendError, with no exit code. Call once at start-up. Returns how many.
   */
  auditLost(): number {
    const now = Date.now();
    const lost = this.deps.runJournal.takeOrphans();
    for (const run of lost) {
      this.deps.audit.record(lostRunRecord(run, now));
      this.deps.metrics.runs.inc({ backend: run.record.backend, phase: 'Failed', reason: 'BackendError' });
    }
    if (lost.length)
      this.deps.logger.warn(
        { runs: lost.map((r) => r.runId) },
        'Audited runs that a sandpit process now gone left under way',
      );
    return lost.length;
  }

  /** The one consumer of the backend's output: decoded once, kept for get_run, handed on. */
  private async relay(
    execution: RunExecution,
    record: RunRecord,
    onOutput: StartRunOptions['onOutput'],
  ): Promise<void> {
    const live = record.live;
    if (!live) return;
    const hand = (chunk: LiveChunk): void => {
      try {
        onOutput?.(chunk);
      } catch {
        // A transport that fails to take output does not fail the run.
      }
    };
    const handAll = (chunk: LiveChunk): void => {
      hand(chunk);
      for (const follower of record.followers) {
        try {
          follower(chunk);
        } catch {
          // Nor does a repeat's.
        }
      }
    };
    for await (const chunk of execution.output) handAll(live.add(chunk));
    for (const rest of live.end()) handAll(rest);
  }

  /**
   * The run's result, recorded, counted and audited, once all its output has been handed on; a
   * failed sandbox is a result too.
   */
  private async outcome(run: LaunchedRun, principal: Principal): Promise<RunResult> {
    const { backend, logger, metrics } = this.deps;
    const { execution, record, spec } = run;
    const failed = (err: AppError): RunResult =>
      buildResult({
        runId: record.runId,
        subject: spec,
        outcome: classify(failedFacts(err.message)),
        startedAt: record.createdAt,
        finishedAt: Date.now(),
        backend: backend.name,
      });
    let res: RunResult;
    try {
      res = await execution.result;
      await run.relayed;
    } catch (e) {
      await run.relayed;
      const err = toAppError(e, 'BACKEND_ERROR');
      if (record.released) {
        // Not this process's to record, count or audit: it goes on, and its record answers for it.
        this.store.forget(record.runId);
        logger.info({ runId: record.runId }, 'run left running: the gateway no longer follows it');
        throw err;
      }
      logger.warn(
        { runId: record.runId, errorCode: err.code, err: err.message },
        'run failed in the backend',
      );
      if (err.code !== 'BACKEND_ERROR') {
        this.store.finish(record, failed(err));
        // It never ran: its key is free for a retry (where the backend made a record, the retry finds it there).
        if (run.keyed) this.keys.forget(run.keyed, record.runId);
        throw err;
      }
      res = failed(err);
    }
    this.store.finish(record, res);
    // A run another process started (a repeat of its key found it recorded) is counted and audited there.
    if (execution.adopted?.()) return res;
    this.deps.rates.output(principal, res.stdoutBytes + res.stderrBytes);
    metrics.runs.inc({ backend: backend.name, phase: res.phase, reason: res.reason ?? '' });
    metrics.runDuration.observe(
      { backend: backend.name, served: res.served ?? 'cold' },
      res.durationMs / 1000,
    );
    this.deps.audit.record(
      buildRunAudit({
        spec,
        outcome: res,
        principal: principal.name,
        backend: backend.name,
        time: new Date(res.finishedAt ?? Date.now()),
      }),
    );
    return res;
  }

  /** An idempotent repeat of a run this process follows. */
  private follow(record: RunRecord, options: StartRunOptions): RunHandle {
    return followRecord(
      record,
      options,
      () => this.store.delivered(record.runId),
      () => this.current(record),
    );
  }

  /** The run's current state; a principal sees only its own runs. */
  async get(runId: string, principal: Principal): Promise<RunResult> {
    const record = this.local(runId, principal);
    if (record) return this.current(record);
    return (await this.deps.backend.runs?.get(runId, principal)) ?? notFound(runId);
  }

  /**
   * The principal's runs that back MCP tasks, as the backend records them beyond this process
   * (none where it does not: then this process's own index of tasks is all there is).
   */
  recordedTasks(principal: Principal, max: number): Promise<RecordedTask[]> {
    return this.deps.backend.runs?.tasks(principal, max) ?? Promise.resolve([]);
  }

  /** The principal's finished runs this process keeps, the newest first. */
  finished(principal: Principal): RunResult[] {
    return this.store.finishedOf(principal.id);
  }

  /** A run this process follows, as it is now. */
  private current(record: RunRecord): RunResult {
    const { runId } = record;
    if (record.result) return record.result;
    const live = record.live?.text ?? { stdout: '', stderr: '' };
    const stream = (text: string) => ({
      text,
      bytes: Buffer.byteLength(text),
      truncated: false,
      binary: false,
    });
    return buildResult({
      runId,
      subject: record.subject,
      outcome: { phase: 'Running', exitCode: null },
      stdout: stream(live.stdout),
      stderr: stream(live.stderr),
      startedAt: record.createdAt,
      finishedAt: undefined,
      backend: this.deps.backend.name,
    });
  }

  /**
   * Cancels a live run and waits until its sandbox is stopped; a finished run is returned as it is.
   * A run another process follows is cancelled through the backend's record.
   */
  async cancel(runId: string, principal: Principal): Promise<RunResult> {
    const record = this.local(runId, principal);
    if (!record) return (await this.deps.backend.runs?.cancel(runId, principal)) ?? notFound(runId);
    if (!record.result) {
      record.controller.abort(new AppError('CANCELLED', 'the run was cancelled'));
      await record.settled;
    }
    return this.current(record);
  }

  /**
   * Stops following every live run and waits until each has settled: a run no call waits on (a
   * task's, a REST `?wait=false` run) is released where the backend lets it go on without this
   * process (its record answers for it, on a restarted gateway too); every other run is cancelled.
   */
  async shutdown(message: string): Promise<void> {
    const active = this.store.active();
    for (const record of active) {
      if (record.release) {
        record.released = true;
        record.release();
      } else {
        record.controller.abort(new AppError('CANCELLED', message));
      }
    }
    await Promise.all(active.map((r) => r.settled));
  }

  /**
   * The run, when this process follows it (or did). Another principal's is "not found": this
   * process knows the run, and no other can answer for it.
   */
  private local(runId: string, principal: Principal): RunRecord | undefined {
    const record = this.store.get(runId);
    if (record && record.owner !== principal.id) notFound(runId);
    return record;
  }
}

function notFound(runId: string): never {
  throw new AppError('NOT_FOUND', `no run ${runId}`, {
    hint: 'runs are kept for a while after they end; check the id',
  });
}
