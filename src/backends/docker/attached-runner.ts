/**
 * One hardened container whose main process is sandpit-runner, attached before start so that no
 * output is lost. It takes exactly one job; its result arrives in-band, so the container's own
 * exit and removal stay off the caller's critical path.
 */
import type Docker from 'dockerode';
import { CANCELLED_FACTS, failedFacts, type RunFacts } from '../../api/outcome.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { OutputChunk } from '../../runner/capture.js';
import type { EgressGate } from '../../egress/socket-gates.js';
import {
  EGRESS_PROTOCOL_VERSION,
  EGRESS_SOCKET_PATH,
  encodeJob,
  newChannelKey,
  OUTPUTS_PROTOCOL_VERSION,
  outputWindow,
} from '../../runner/protocol.js';
import { checkRunnerVersion, RunnerReader, type RunnerOutcome } from '../../runner/reader.js';
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
  /** An egress sandbox's door to the proxy (bound to the run that claims it); none without egress. */
  readonly gate: EgressGate | undefined;
  private readonly attached: AttachedContainer;
  private readonly image: string;
  private version = 0;

  private constructor(
    attached: AttachedContainer,
    reader: RunnerReader,
    { image, gate }: { image: string; gate: EgressGate | undefined },
  ) {
    this.attached = attached;
    this.reader = reader;
    this.image = image;
    this.gate = gate;
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

  /**
   * Creates, attaches and starts the container (with its egress gate, whose directory `config`
   * mounts). Throws typed engine errors; leaves nothing behind on failure, the gate closed.
   */
  static async start(
    docker: Docker,
    config: Docker.ContainerCreateOptions,
    gate?: EgressGate,
  ): Promise<AttachedRunner> {
    const reader = new RunnerReader();
    try {
      const attached = await AttachedContainer.start(docker, config, (b) => reader.push(b));
      return new AttachedRunner(attached, reader, { image: config.Image ?? '?', gate });
    } catch (e) {
      await gate?.close();
      throw e;
    }
  }

  /**
   * True once the runner waits for its job, false when its container ended first; throws
   * IMAGE_OUTDATED when the image's runner is older than this code's protocol.
   */
  async ready(): Promise<boolean> {
    const version = await Promise.race([this.reader.ready, this.ended.then(() => undefined)]);
    if (version === undefined) return false;
    checkRunnerVersion(version, this.image);
    this.version = version;
    return true;
  }

  /** Runs the one job. Deadline: the runner's own, and the engine's kill OUTER_DEADLINE_GRACE_MS later. */
  async run(
    spec: EffectiveSpec,
    onChunk: (c: OutputChunk) => void,
    signal?: AbortSignal,
  ): Promise<JobResult> {
    await this.ready();
    const outputs = spec.outputs.entries.length > 0;
    if (outputs)
      checkRunnerVersion(this.version, this.image, {
        version: OUTPUTS_PROTOCOL_VERSION,
        what: 'returning output files',
      });
    const egress = spec.network.egress === 'allowlist';
    if (egress) {
      checkRunnerVersion(this.version, this.image, { version: EGRESS_PROTOCOL_VERSION, what: 'egress' });
      if (!this.gate?.tenant) throw new Error('an egress run needs its sandbox gate bound to it');
    }
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
      const job = encodeJob(spec, { key, ...(egress ? { egressSocket: EGRESS_SOCKET_PATH } : {}) });
      this.attached.write([job]).catch(() => {});
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

  /** Removes the container (killing it if needed), then its gate. Idempotent; never throws. */
  async remove(): Promise<void> {
    await this.attached.remove();
    await this.gate?.close().catch(() => {});
  }
}
