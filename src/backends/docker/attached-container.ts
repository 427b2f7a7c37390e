/**
 * A container whose main process talks over its attached stdio: attached before it starts (so no
 * output is lost) or later (a session a restarted gateway adopts). Stdout goes to a sink, stderr
 * is kept as a short diagnosis; removal is idempotent and waits for a removal already under way.
 */
import type { Duplex } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type Docker from 'dockerode';
import { backoffDelay } from '../../shared/backoff.js';
import { within } from '../../shared/time.js';
import { DockerDemuxer } from './demux.js';
import { engineError } from './engine-errors.js';

const DIAGNOSTICS_BYTES = 4096;
/** How long `remove()` waits for a removal the engine already has in progress. */
const REMOVAL_WAIT_MS = 10_000;

export type Sink = (data: Buffer) => void;

export class AttachedContainer {
  readonly container: Docker.Container;
  private stream: Duplex | undefined;
  private diagnostics = '';
  private sink: Sink;
  private endedResolve!: () => void;
  /** Resolves when the attach stream closes (the main process exited, or the container is gone). */
  readonly ended = new Promise<void>((r) => (this.endedResolve = r));
  private removal: Promise<void> | undefined;
  private isEnded = false;

  private constructor(container: Docker.Container, sink: Sink) {
    this.container = container;
    this.sink = sink;
    void this.ended.then(() => (this.isEnded = true));
  }

  /** Creates, attaches and starts the container. Throws typed engine errors; leaves nothing behind on failure. */
  static async start(
    docker: Docker,
    config: Docker.ContainerCreateOptions,
    sink: Sink,
  ): Promise<AttachedContainer> {
    const context = { image: config.Image, runtime: config.HostConfig?.Runtime };
    let container: Docker.Container;
    try {
      container = await docker.createContainer(config);
    } catch (e) {
      throw engineError(e, context);
    }
    const attached = new AttachedContainer(container, sink);
    try {
      await attached.attach();
      await container.start();
    } catch (e) {
      await attached.remove();
      throw engineError(e, context);
    }
    return attached;
  }

  /** Attaches to a container that already runs (nothing it wrote before is seen). */
  static async attachTo(container: Docker.Container, sink: Sink): Promise<AttachedContainer> {
    const attached = new AttachedContainer(container, sink);
    try {
      await attached.attach();
    } catch (e) {
      throw engineError(e, {});
    }
    return attached;
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
    const text = new StringDecoder('utf8');
    const demux = new DockerDemuxer(
      (b) => this.sink(b),
      (b) => {
        if (this.diagnostics.length < DIAGNOSTICS_BYTES) this.diagnostics += text.write(b);
      },
    );
    stream.on('data', (chunk: Buffer) => demux.push(chunk));
    stream.on('end', () => this.endedResolve());
    stream.on('close', () => this.endedResolve());
    stream.on('error', () => this.endedResolve());
  }

  /** Where stdout goes from now on. */
  setSink(sink: Sink): void {
    this.sink = sink;
  }

  /** False once the attach stream closed or removal began. */
  get alive(): boolean {
    return !this.isEnded && this.removal === undefined;
  }

  /**
   * Writes `parts` to the main process's stdin in one go (corked: one writev, nothing joined);
   * resolves once the stream took them (waits while it is full).
   */
  write(parts: readonly Buffer[]): Promise<void> {
    const stream = this.stream;
    if (!stream || !this.alive) return Promise.reject(new Error('the container is not attached'));
    return new Promise((resolve, reject) => {
      let ok = true;
      stream.cork();
      for (const part of parts) ok = stream.write(part, (e) => (e ? reject(e) : undefined));
      stream.uncork();
      if (ok) return resolve();
      const done = (): void => {
        stream.off('drain', done);
        stream.off('close', done);
        resolve();
      };
      stream.on('drain', done);
      stream.on('close', done);
    });
  }

  /** `message`, with what the main process wrote to stderr. */
  diagnosis(message: string): string {
    const d = this.diagnostics.trim();
    return d ? `${message}: ${d}` : message;
  }

  get stderr(): string {
    return this.diagnostics;
  }

  async kill(): Promise<void> {
    await this.container.kill().catch(() => {});
  }

  /** Closes the attach stream only: the container keeps running (a session another gateway may adopt). */
  detach(): void {
    this.stream?.destroy();
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
