/**
 * Tells a long-running Docker backend when its engine came back after it was away (stopped,
 * restarted, crashed). It follows the engine's event stream, which ends when dockerd exits; the
 * engine counts as away only once a probe on a new connection finds it silent too, and as back once
 * one answers. With live-restore off (the default) an engine that went away took every container
 * with it, and the removals tried meanwhile failed: the backend clears what is left then.
 */
import type Docker from 'dockerode';
import type { Logger } from '../../observability/logger.js';
import { backoffDelay } from '../../shared/backoff.js';
import { engineAnswers } from './engine-probe.js';

/** How often an away engine is asked whether it is back: from this, doubling up to the max. */
const BACK_POLL = { initialMs: 250, maxMs: 2000 };

export interface EngineWatchOptions {
  docker: Docker;
  /** Called once the engine answers again after it was away since `lostAt` (epoch ms). */
  onBack: (lostAt: number) => void;
  logger?: Logger | undefined;
}

export class EngineWatch {
  private readonly options: EngineWatchOptions;
  private stream: NodeJS.ReadableStream | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: EngineWatchOptions) {
    this.options = options;
  }

  start(): void {
    void this.follow();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    (this.stream as { destroy?: () => void } | undefined)?.destroy?.();
    this.stream = undefined;
  }

  private answers(): Promise<boolean> {
    const { docker } = this.options;
    return engineAnswers(docker.modem as { socketPath?: unknown }, () => docker.ping());
  }

  /** Follows the event stream (daemon events only: nothing flows but its end). */
  private async follow(): Promise<void> {
    if (this.stopped) return;
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.options.docker.getEvents({ filters: { type: ['daemon'] } });
    } catch {
      return this.streamEnded();
    }
    if (this.stopped) return void (stream as { destroy?: () => void }).destroy?.();
    this.stream = stream;
    let ended = false;
    const end = (): void => {
      if (ended || this.stopped) return;
      ended = true;
      this.stream = undefined;
      void this.streamEnded();
    };
    stream.on('data', () => undefined);
    stream.on('end', end);
    stream.on('close', end);
    stream.on('error', end);
  }

  /** The stream ended: the engine is away if it does not answer a new connection either. */
  private async streamEnded(): Promise<void> {
    if (this.stopped) return;
    if (await this.answers()) return this.later(() => this.follow(), BACK_POLL.maxMs);
    const lostAt = Date.now();
    this.options.logger?.warn('The Docker engine went away; waiting for it to come back');
    await this.waitBack(lostAt, 1);
  }

  private async waitBack(lostAt: number, attempt: number): Promise<void> {
    if (this.stopped) return;
    if (!(await this.answers())) {
      return this.later(() => this.waitBack(lostAt, attempt + 1), backoffDelay(attempt, BACK_POLL));
    }
    this.options.logger?.info(
      { awayMs: Date.now() - lostAt },
      'The Docker engine is back; clearing what its absence left',
    );
    this.options.onBack(lostAt);
    await this.follow();
  }

  private later(f: () => Promise<void>, ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void f(), ms);
    this.timer.unref();
  }
}
