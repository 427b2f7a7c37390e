/**
 * superviseRun(): follows one created SandboxRun to its end. Its status comes by watch; once the
 * pod runs, its log is followed and fed through the same head/tail capture as the Docker backend's
 * output (a warm run's without the runner's exit trailer, log-output.ts); an abort sets
 * `spec.cancel` and waits for the operator to confirm, while a release only stops following (the
 * run goes on, for any gateway process to read from the SandboxRun). The gateway's own clocks
 * bound every wait: a run no operator picks up fails fast, a run that never ends fails at its
 * deadline, and a cancel the operator does not confirm ends Cancelled anyway.
 *
 * A warm run's status says Running (with its pod) before the operator writes the job, so the log
 * is followed from the job's start. Its terminal status comes from the attach stream, before the
 * container has exited and so before the log ends: when that status holds the whole output
 * exactly, the run finishes with it at once.
 */
import { isTerminal, type Phase } from '../../api/run.js';
import {
  SandboxRunStatusSchema,
  type SandboxRun,
  type SandboxRunStatus,
} from '../../api/v1alpha1/sandboxrun.js';
import type { Logger } from '../../observability/logger.js';
import { onAbort } from '../../shared/abort.js';
import { AppError, toAppError } from '../../shared/errors.js';
import { within } from '../../shared/time.js';
import type { CapturedStream } from '../../api/result.js';
import type { OutputChunk } from '../../runner/capture.js';
import type { OutputWindow } from '../../runner/protocol.js';
import type { FollowEnd } from './follow-object.js';
import { LogOutput } from './log-output.js';
import { readLog, type LogReader } from './read-log.js';
import type { ObjectRef, RunApi } from './run-api.js';
import { exactStatusOutput, outputFromStatus } from './run-result.js';

export interface SuperviseTiming {
  /** Server-side timeout of each watch; the watch is re-opened after it. */
  watchTimeoutSeconds: number;
  /** A run that no operator has picked up (it has no status at all) by then fails with ENGINE_UNAVAILABLE. */
  pickupTimeoutMs: number;
  /** The gateway's wall-clock deadline for the whole run (pending time, run time and slack). */
  deadlineMs: number;
  /** How long a cancel waits for the operator's Cancelled before the run ends Cancelled anyway. */
  cancelWaitMs: number;
  /** How long the log may take to end after the status says the run finished. */
  logGraceMs: number;
}

export interface SuperviseInput {
  api: RunApi;
  namespace: string;
  name: string;
  /** The created object's resourceVersion: the watch starts there. */
  resourceVersion: string | undefined;
  window: OutputWindow;
  /** The run asked for output files: its log ends with them, which are not output. */
  files?: boolean;
  timing: SuperviseTiming;
  onChunk(chunk: OutputChunk): void;
  /** Aborting cancels the run. */
  signal?: AbortSignal | undefined;
  /**
   * Aborting stops following the run and leaves it running (spec.cancel is not set): its watch
   * and log close, and the supervision rejects with ENGINE_UNAVAILABLE unless it had seen the end.
   */
  release?: AbortSignal | undefined;
  logger?: Logger | undefined;
}

export interface Supervised {
  /** The terminal status. */
  status: SandboxRunStatus;
  output: CapturedStream;
  /** Why the output is incomplete or taken from the status, when it is. */
  outputNote: string | undefined;
}

/** Phases in which the pod's container has started, so its log can be read. */
const LOG_PHASES: ReadonlySet<Phase> = new Set(['Running', 'Succeeded', 'Failed', 'TimedOut']);
/** How long reading the rest of a log (after a follow that ended early) may take. */
const REST_READ_MS = 30_000;

export function superviseRun(input: SuperviseInput): Promise<Supervised> {
  return new RunSupervisor(input).run();
}

class RunSupervisor {
  private readonly i: SuperviseInput;
  private output: LogOutput;
  private readonly stop = new AbortController();
  private latest: SandboxRunStatus | undefined;
  private log: LogReader | undefined;
  /** The pod whose log is followed. */
  private logPod: string | undefined;
  /** The output came whole from the status: no log was read. */
  private outputFromStatus = false;
  private cancelling = false;
  private cancelTimer: NodeJS.Timeout | undefined;
  private unconfirmedCancel = false;
  private failure: AppError | undefined;
  private released = false;

  constructor(input: SuperviseInput) {
    this.i = input;
    this.output = this.newOutput();
  }

  private newOutput(): LogOutput {
    const output = new LogOutput(this.i.window, (c) => this.i.onChunk(c));
    if (this.i.files) output.expectFiles();
    return output;
  }

  private get key(): string {
    return `${this.i.namespace}/${this.i.name}`;
  }

  private get ref(): ObjectRef {
    return { namespace: this.i.namespace, name: this.i.name };
  }

  async run(): Promise<Supervised> {
    const { timing } = this.i;
    const timers = [
      setTimeout(() => {
        if (!this.latest) this.fail(this.noOperator());
      }, timing.pickupTimeoutMs),
      setTimeout(() => this.fail(this.overdue()), timing.deadlineMs),
    ];
    const detach = onAbort(this.i.signal, () => this.cancel());
    const detachRelease = onAbort(this.i.release, () => this.letGo());
    let end: FollowEnd = 'aborted';
    try {
      end = await this.i.api.followRun(this.ref, {
        resourceVersion: this.i.resourceVersion,
        onObject: (obj) => this.observe(obj),
        watchTimeoutSeconds: timing.watchTimeoutSeconds,
        signal: this.stop.signal,
        onRestart: ({ reason, failures, err }) =>
          this.i.logger?.debug(
            { run: this.key, reason, failures, ...(err ? { err: err.message } : {}) },
            'Re-opened the watch of SandboxRun',
          ),
      });
    } catch (e) {
      this.fail(toAppError(e, 'BACKEND_ERROR'));
    } finally {
      timers.forEach(clearTimeout);
      clearTimeout(this.cancelTimer);
      detach();
      detachRelease();
    }
    if (this.failure) {
      this.log?.abort();
      if (!this.cancelling) await this.i.api.cancelRun(this.ref).catch(() => undefined);
      throw this.failure;
    }
    if (this.released) {
      this.log?.abort();
      throw this.leftRunning();
    }
    const status = this.finalStatus(end);
    const { output, note } = await this.collectOutput(status);
    return { status, output, outputNote: note };
  }

  /** Sees one version of the run; true once it is finished. */
  private observe(obj: SandboxRun): boolean {
    const parsed = SandboxRunStatusSchema.safeParse(obj.status ?? {});
    const status = parsed.success ? parsed.data : undefined;
    if (!status?.phase) return false;
    if (status.phase !== this.latest?.phase)
      this.i.logger?.debug(
        { run: this.key, phase: status.phase, reason: status.reason },
        'SandboxRun phase changed',
      );
    this.latest = status;
    const finished = isTerminal(status.phase);
    this.dropLogOfAnotherPod(status.podName);
    if (this.log || this.outputFromStatus || !status.podName || !LOG_PHASES.has(status.phase))
      return finished;
    // Finished before it was seen running: when the status holds the whole output exactly, the log adds nothing.
    const exact = finished ? exactStatusOutput(status.output) : undefined;
    if (exact) {
      this.outputFromStatus = true;
      this.output.finishWith(exact);
    } else {
      if (status.served === 'warm') this.output.expectTrailer();
      this.startLog(status.podName);
    }
    return finished;
  }

  /**
   * The operator served the run again on another pod (its job never reached the first one, whose
   * runner said so in its log): what was read of the first pod's log is not the run's output.
   */
  private dropLogOfAnotherPod(podName: string | undefined): void {
    if (!this.log || podName === this.logPod) return;
    this.log.abort();
    this.log = undefined;
    this.output = this.newOutput();
  }

  private startLog(pod: string): void {
    this.i.logger?.debug({ run: this.key, pod }, 'Following pod log');
    this.logPod = pod;
    this.log = readLog(
      this.i.api,
      { pod: { namespace: this.i.namespace, name: pod }, follow: true },
      (data) => this.output.addLog(data),
    );
  }

  private cancel(): void {
    if (this.cancelling) return;
    this.cancelling = true;
    this.i.logger?.debug({ run: this.key }, 'Cancelling SandboxRun');
    this.i.api.cancelRun(this.ref).catch((e: unknown) => {
      if (!(e instanceof AppError && e.code === 'NOT_FOUND')) this.fail(toAppError(e, 'BACKEND_ERROR'));
    });
    this.cancelTimer = setTimeout(() => {
      this.unconfirmedCancel = true;
      this.stop.abort();
    }, this.i.timing.cancelWaitMs);
  }

  /** Stops following; a run that has failed already is still cancelled (run()). */
  private letGo(): void {
    if (this.failure) return;
    this.i.logger?.debug({ run: this.key }, 'Releasing SandboxRun: it goes on, unfollowed');
    this.released = true;
    this.stop.abort();
  }

  /** Once released, nothing is cancelled: a later failure is the next follower's to see. */
  private fail(err: AppError): void {
    if (this.released) return;
    this.failure ??= err;
    this.stop.abort();
  }

  private leftRunning(): AppError {
    return new AppError(
      'ENGINE_UNAVAILABLE',
      `this gateway process stopped following SandboxRun ${this.key} and left it running`,
      { hint: 'any gateway process answers for the run from its SandboxRun (get_run, tasks/get)' },
    );
  }

  private noOperator(): AppError {
    const s = Math.round(this.i.timing.pickupTimeoutMs / 1000);
    return new AppError(
      'ENGINE_UNAVAILABLE',
      `no operator acted on SandboxRun ${this.key} within ${s} s (it has no status)`,
      {
        hint: `start the operator (\`sandpit operator\`, deploy/README.md) and make sure it watches namespace ${this.i.namespace}`,
      },
    );
  }

  private overdue(): AppError {
    const s = Math.round(this.i.timing.deadlineMs / 1000);
    return new AppError(
      'BACKEND_ERROR',
      `SandboxRun ${this.key} did not finish within ${s} s (last phase: ${this.latest?.phase ?? 'none'}); is the operator running?`,
    );
  }

  private finalStatus(end: FollowEnd): SandboxRunStatus {
    const last = this.latest ?? {};
    if (end === 'seen' && this.latest) return this.latest;
    const message =
      end === 'deleted'
        ? 'the SandboxRun was deleted before it finished'
        : this.unconfirmedCancel
          ? `cancel requested (spec.cancel), but the operator did not confirm it within ${Math.round(this.i.timing.cancelWaitMs / 1000)} s`
          : 'the run was cancelled';
    return { ...last, phase: 'Cancelled', reason: 'Cancelled', message };
  }

  /** The output: the log as read, completed when it ended early, or the status's tail when it could not be read. */
  private async collectOutput(status: SandboxRunStatus): Promise<{ output: CapturedStream; note?: string }> {
    if (this.outputFromStatus) return { output: this.output.finish() };
    const log = this.log;
    if (!log) return { output: outputFromStatus(status.output) };
    if (status.phase === 'Cancelled') {
      // The pod is being deleted: its log ends when the kubelet kills it, which the caller need not wait for.
      log.abort();
      return { output: this.output.finish() };
    }
    // The status has the whole output (a warm run's, from the attach stream): no need to wait for the log's end.
    const exact = exactStatusOutput(status.output);
    if (exact && this.output.finishWith(exact)) {
      log.abort();
      return { output: this.output.finish() };
    }
    return this.outputOfLog(status, log);
  }

  /** The output once the followed log has ended (or its grace is over): completed when it ended early. */
  private async outputOfLog(
    status: SandboxRunStatus,
    log: LogReader,
  ): Promise<{ output: CapturedStream; note?: string }> {
    const end = (await within(log.done, this.i.timing.logGraceMs)) ?? { kind: 'aborted' as const };
    log.abort();
    if (end.kind === 'failed') {
      return {
        output: outputFromStatus(status.output),
        ...(status.startTime
          ? { note: `the pod log could not be read (HTTP ${end.status}); the output is the status's tail` }
          : {}),
      };
    }
    // The follow may end before the runtime has written the last of the log (containerd reports the
    // exit first). The operator's count shows that, unless it stopped counting at its read limit
    // (a truncated output): then only a second read can tell. The count is the runner's: past the
    // output limit the log holds only the head and the tail, as the capture keeps them.
    const counted = status.output?.bytes ?? 0;
    if ((counted > log.bytes || status.output?.truncated === true) && status.podName) {
      const complete = await this.readRest(status.podName, log.bytes);
      if (!complete) {
        return {
          output: this.output.finish(counted),
          note: 'the pod log was cut short; the output may miss bytes in the middle',
        };
      }
    }
    return { output: this.output.finish(counted) };
  }

  /** Reads the log again and adds what the follow missed (everything after `seen` bytes). */
  private async readRest(pod: string, seen: number): Promise<boolean> {
    let skip = seen;
    const rest = readLog(
      this.i.api,
      { pod: { namespace: this.i.namespace, name: pod }, follow: false },
      (chunk) => {
        if (skip >= chunk.length) {
          skip -= chunk.length;
          return;
        }
        this.output.addLog(chunk.subarray(skip));
        skip = 0;
      },
    );
    const end = await within(rest.done, REST_READ_MS);
    rest.abort();
    return end?.kind === 'ended';
  }
}
