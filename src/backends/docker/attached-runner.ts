/**
 * One hardened container whose main process is sandpit-runner, attached before start so that no
 * output is lost. It takes exactly one job; its result arrives in-band, so the container's own
 * exit and removal stay off the caller's critical path.
 */
import type Docker from 'dockerode';
import type { RunFacts } from '../../api/outcome.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { OutputChunk } from '../../runner/capture.js';
import type { EgressGate } from '../../egress/socket-gates.js';
import { EGRESS_SOCKET_PATH } from '../../runner/protocol.js';
import { RunnerReader } from '../../runner/reader.js';
import { runJob, runnerReady, type JobResult, type RunnerSandbox } from '../runner-job.js';
import { AttachedContainer } from './attached-container.js';
import { containerEngineAnswers } from './engine-probe.js';

/** A run's failure when its sandbox ended while the engine went away. */
export const ENGINE_GONE =
  'the Docker engine stopped or restarted mid-run, and took the sandbox with it (live-restore is off)';

export { OUTER_DEADLINE_GRACE_MS, type JobResult } from '../runner-job.js';

export class AttachedRunner {
  readonly reader: RunnerReader;
  /** An egress sandbox's door to the proxy (bound to the run that claims it); none without egress. */
  readonly gate: EgressGate | undefined;
  private readonly attached: AttachedContainer;
  private readonly image: string;

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
    return (await runnerReady(this.sandbox)) !== undefined;
  }

  /** Runs the one job. Deadline: the runner's own, and the engine's kill OUTER_DEADLINE_GRACE_MS later. */
  run(spec: EffectiveSpec, onChunk: (c: OutputChunk) => void, signal?: AbortSignal): Promise<JobResult> {
    return runJob(this.sandbox, spec, onChunk, signal);
  }

  /** This container as the shared job code drives it. */
  private get sandbox(): RunnerSandbox {
    return {
      reader: this.reader,
      image: this.image,
      ended: this.ended,
      egressSocket: this.gate?.tenant ? EGRESS_SOCKET_PATH : undefined,
      write: (parts) => this.attached.write(parts),
      kill: () => this.kill(),
      endWithoutReport: (deadline) => this.factsWithoutReport(deadline),
    };
  }

  /**
   * The runner never reported (it was killed with its sandbox, e.g. gVisor's whole-sandbox OOM):
   * ask the engine. A sandbox that ended so while the engine does not answer went with the engine.
   */
  private async factsWithoutReport(deadline: boolean): Promise<RunFacts> {
    const facts = await this.exitFacts(deadline);
    if (facts.failure === undefined || (await containerEngineAnswers(this.container))) return facts;
    return { ...facts, failure: ENGINE_GONE };
  }

  private async exitFacts(deadline: boolean): Promise<RunFacts> {
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
