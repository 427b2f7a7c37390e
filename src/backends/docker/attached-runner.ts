/**
 * One hardened container whose main process is sandpit-runner, attached before start so that no
 * output is lost. It takes exactly one job; its result arrives in-band, so the container's own
 * exit and removal stay off the caller's critical path.
 */
import type Docker from 'dockerode';
import { CANCELLED_FACTS, failedFacts, type RunFacts } from '../../api/outcome.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { OutputChunk } from '../../runner/capture.js';
import { encodeJob, newChannelKey, outputWindow } from '../../runner/protocol.js';
import {
  checkOutputsSupported,
  checkRunnerVersion,
  RunnerReader,
  type RunnerOutcome,
} from '../../runner/reader.js';
import { onAbort } from '../../shared/abort.js';
import { AttachedContainer } from './attached-container.js';

/** How long after the runner's own deadline the engine kills the container from outside. */
export const OUTER_DEADLINE_GRACE_MS = 1000;

export interface JobResult {
  outcome: RunnerOutcome;
  facts: RunFacts;
}

export class AttachedRunner {
  readonly reader: RunnerReader;
  private readonly attached: AttachedContainer;
  private readonly image: string;

  private constructor(attached: AttachedContainer, reader: RunnerReader, image: string) {
    this.attached = attached;
    this.reader = reader;
    this.image = image;
  }

  get container(): Docker.Container {
    return this.attached.container;
  }

  /** Resolves when the attach stream closes (the runner exited or the container was killed). */
  get ended(): Promise<void> {
    return this.attached.ended;
  }

  /** False once the attach stream closed: the runner can no longer take a job. */
  get alive(): boolean {
    return this.attached.alive;
  }

  /** Creates, attaches and starts the container. Throws typed engine errors; leaves nothing behind on failure. */
  static async start(docker: Docker, config: Docker.ContainerCreateOptions): Promise<AttachedRunner> {
    const reader = new RunnerReader();
    const attached = await AttachedContainer.start(docker, config, (b) => reader.push(b));
    return new AttachedRunner(attached, reader, config.Image ?? '?');
  }

  /**
   * True once the runner waits for its job, false when its container ended first; throws
   * IMAGE_OUTDATED when the image's runner is older than this code's protocol, or (`outputs`) than
   * the protocol that returns output files.
   */
  async ready(outputs = false): Promise<boolean> {
    const version = await Promise.race([this.reader.ready, this.ended.then(() => undefined)]);
    if (version === undefined) return false;
    checkRunnerVersion(version, this.image);
    if (outputs) checkOutputsSupported(version, this.image);
    return true;
  }

  /** Runs the one job. Deadline: the runner's own, and the engine's kill OUTER_DEADLINE_GRACE_MS later. */
  async run(
    spec: EffectiveSpec,
    onChunk: (c: OutputChunk) => void,
    signal?: AbortSignal,
  ): Promise<JobResult> {
    const outputs = spec.outputs.entries.length > 0;
    await this.ready(outputs);
    const key = newChannelKey();
    this.reader.begin(
      outputWindow(spec.limits.outputBytes),
      key,
      onChunk,
      outputs ? spec.outputs.caps : undefined,
    );
    let killedBy: 'deadline' | 'cancel' | undefined;
    const kill = (why: 'deadline' | 'cancel'): void => {
      killedBy ??= why;
      void this.kill();
    };
    const timer = setTimeout(
      () => kill('deadline'),
      spec.limits.timeoutSeconds * 1000 + OUTER_DEADLINE_GRACE_MS,
    );
    const detach = onAbort(signal, () => kill('cancel'));
    try {
      this.attached.write([encodeJob(spec, { key })]).catch(() => {});
      await Promise.race([this.reader.done, this.ended]);
    } finally {
      clearTimeout(timer);
      detach();
    }
    const outcome = this.reader.outcome();
    if (killedBy === 'cancel') {
      return { outcome, facts: CANCELLED_FACTS };
    }
    if (outcome.exit) {
      const { exitCode, timedOut, oomKilled } = outcome.exit;
      return { outcome, facts: { exitCode, timedOut, oomKilled, cancelled: false } };
    }
    return { outcome, facts: await this.factsWithoutReport(outcome, killedBy === 'deadline') };
  }

  /** The runner never reported (it was killed with its sandbox, e.g. gVisor's whole-sandbox OOM): ask the engine. */
  private async factsWithoutReport(outcome: RunnerOutcome, deadline: boolean): Promise<RunFacts> {
    if (outcome.failure !== undefined) return failedFacts(outcome.failure);
    try {
      await this.container.wait();
      const info = await this.container.inspect();
      const oomKilled = info.State.OOMKilled;
      return {
        exitCode: info.State.ExitCode,
        timedOut: deadline,
        oomKilled,
        cancelled: false,
        ...(deadline || oomKilled
          ? {}
          : { failure: this.attached.diagnosis('the sandbox ended without reporting a result') }),
      };
    } catch (e) {
      return { exitCode: null, timedOut: deadline, oomKilled: false, cancelled: false, failure: String(e) };
    }
  }

  kill(): Promise<void> {
    return this.attached.kill();
  }

  /** Removes the container (killing it if needed). Idempotent; never throws. */
  remove(): Promise<void> {
    return this.attached.remove();
  }
}
