/**
 * One hardened container whose main process is sandpit-runner, attached before start so that no
 * output is lost. It takes exactly one job; its result arrives in-band, so the container's own
 * exit and removal stay off the caller's critical path.
 */
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { CANCELLED_FACTS, failedFacts, type RunFacts } from '../../api/outcome.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { OutputChunk } from '../../runner/capture.js';
import { encodeJob, newChannelKey, outputWindow } from '../../runner/protocol.js';
import { checkRunnerVersion, RunnerReader, type RunnerOutcome } from '../../runner/reader.js';
import { onAbort } from '../../shared/abort.js';
import { backoffDelay } from '../../shared/backoff.js';
import { within } from '../../shared/time.js';
import { DockerDemuxer } from './demux.js';
import { engineError } from './engine-errors.js';

/** How long after the runner's own deadline the engine kills the container from outside. */
export const OUTER_DEADLINE_GRACE_MS = 1000;
const DIAGNOSTICS_BYTES = 4096;
/** How long `remove()` waits for a removal the engine already has in progress. */
const REMOVAL_WAIT_MS = 10_000;

export interface JobResult {
  outcome: RunnerOutcome;
  facts: RunFacts;
}

export class AttachedRunner {
  readonly container: Docker.Container;
  readonly reader = new RunnerReader();
  private stream: Duplex | undefined;
  private diagnostics = '';
  private endedResolve!: () => void;
  /** Resolves when the attach stream closes (the runner exited or the container was killed). */
  readonly ended = new Promise<void>((r) => (this.endedResolve = r));
  private removal: Promise<void> | undefined;
  private isEnded = false;

  private readonly image: string;

  private constructor(container: Docker.Container, image: string) {
    this.container = container;
    this.image = image;
    void this.ended.then(() => (this.isEnded = true));
  }

  /** False once the attach stream closed: the runner can no longer take a job. */
  get alive(): boolean {
    return !this.isEnded && this.removal === undefined;
  }

  /** Creates, attaches and starts the container. Throws typed engine errors; leaves nothing behind on failure. */
  static async start(docker: Docker, config: Docker.ContainerCreateOptions): Promise<AttachedRunner> {
    const context = { image: config.Image, runtime: config.HostConfig?.Runtime };
    let container: Docker.Container;
    try {
      container = await docker.createContainer(config);
    } catch (e) {
      throw engineError(e, context);
    }
    const runner = new AttachedRunner(container, config.Image ?? '?');
    try {
      await runner.attach();
      await container.start();
    } catch (e) {
      await runner.remove();
      throw engineError(e, context);
    }
    return runner;
  }

  private async attach(): Promise<void> {
    const stream = (await this.container.attach({
      stream: true,
      stdin: true,
      stdout: true,
      stderr: true,
      hijack: true,
    })) as unknown as Duplex;
    this.stream = stream;
    const demux = new DockerDemuxer(
      (b) => this.reader.push(b),
      (b) => {
        if (this.diagnostics.length < DIAGNOSTICS_BYTES) this.diagnostics += b.toString('utf8');
      },
    );
    stream.on('data', (chunk: Buffer) => demux.push(chunk));
    stream.on('end', () => this.endedResolve());
    stream.on('close', () => this.endedResolve());
    stream.on('error', () => this.endedResolve());
  }

  /**
   * True once the runner waits for its job, false when its container ended first; throws
   * IMAGE_OUTDATED when the image's runner is older than this code's protocol.
   */
  async ready(): Promise<boolean> {
    const version = await Promise.race([this.reader.ready, this.ended.then(() => undefined)]);
    if (version === undefined) return false;
    checkRunnerVersion(version, this.image);
    return true;
  }

  /** Runs the one job. Deadline: the runner's own, and the engine's kill OUTER_DEADLINE_GRACE_MS later. */
  async run(
    spec: EffectiveSpec,
    onChunk: (c: OutputChunk) => void,
    signal?: AbortSignal,
  ): Promise<JobResult> {
    await this.ready();
    const key = newChannelKey();
    this.reader.begin(outputWindow(spec.limits.outputBytes), key, onChunk);
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
      this.stream?.write(encodeJob(spec, { key }));
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
          : { failure: this.diagnosis('the sandbox ended without reporting a result') }),
      };
    } catch (e) {
      return { exitCode: null, timedOut: deadline, oomKilled: false, cancelled: false, failure: String(e) };
    }
  }

  private diagnosis(message: string): string {
    const d = this.diagnostics.trim();
    return d ? `${message}: ${d}` : message;
  }

  async kill(): Promise<void> {
    await this.container.kill().catch(() => {});
  }

  /** Removes the container (killing it if needed). Idempotent; never throws. */
  remove(): Promise<void> {
    this.removal ??= (async () => {
      this.stream?.destroy();
      for (let attempt = 1; ; attempt++) {
        try {
          await this.container.remove({ force: true, v: true });
          return;
        } catch (e) {
          const status = (e as { statusCode?: number }).statusCode;
          if (status === 404) return;
          // 409: the engine is already removing it. Resolve only once it is really gone.
          if (status === 409) return void (await within(this.removed(), REMOVAL_WAIT_MS));
          // Anything else (e.g. a busy mount) is retried briefly; the reaper gets what is left.
          if (attempt >= 3) throw e;
          await new Promise((r) => setTimeout(r, backoffDelay(attempt, { initialMs: 200, maxMs: 1000 })));
        }
      }
    })().catch(() => {});
    return this.removal;
  }

  /** Resolves once the engine has removed the container (at once when it is already gone). */
  private async removed(): Promise<void> {
    await (this.container.wait({ condition: 'removed' }) as Promise<unknown>).catch(() => undefined);
  }
}
