/**
 * One session's container: started cold, claimed from a session pool, or re-attached after a
 * gateway restart. It hands the runner's byte stream to a SessionClient once the runner said it is
 * ready (or, when adopted, at once: the resync then comes first), and tells how it ended.
 */
import type Docker from 'dockerode';
import type { SessionClient } from '../../../runner/session-client.js';
import { KEY_BYTES } from '../../../runner/session-protocol.js';
import { AppError } from '../../../shared/errors.js';
import { within } from '../../../shared/time.js';
import type { SandboxEnd } from '../../sessions.js';
import { SessionChannel } from '../../session-channel.js';
import type { SessionHost } from '../../session-sandbox.js';
import type { EgressGate } from '../../../egress/socket-gates.js';
import { AttachedContainer } from '../attached-container.js';
import { containerEngineAnswers } from '../engine-probe.js';
import { LABELS } from '../labels.js';
import { sessionEnd } from '../../../runner/session-end.js';

/** How long an ended container is given to report its exit status. */
const EXIT_WAIT_MS = 3000;

/**
 * What an engine going away does to a session container: a shutdown stops it (the runner ends on
 * SIGTERM), a dead engine loses it. Either, while the engine does not answer, is the engine's end.
 */
const ENDS_OF_AN_ENGINE_SHUTDOWN: ReadonlySet<SandboxEnd['reason']> = new Set([
  'ContainerFailed',
  'RunnerGone',
]);

const ENGINE_RESTARTED: SandboxEnd = {
  reason: 'EngineRestarted',
  message:
    "the Docker engine stopped or restarted, and took the session's container with it (live-restore is off)",
};

export class SessionContainer implements SessionHost {
  /** An egress session's door to the proxy (bound once the session opens); none without egress. */
  gate: EgressGate | undefined;
  private readonly attached: AttachedContainer;
  private readonly image: string;
  private readonly channel: SessionChannel;

  private constructor(attached: AttachedContainer, image: string, channel: SessionChannel) {
    this.attached = attached;
    this.image = image;
    this.channel = channel;
    void attached.ended.then(() => channel.stopped());
  }

  /**
   * Creates and starts a session-mode container (with its egress gate, whose directory `config`
   * mounts); its runner announces itself with the ready frame. Nothing is left behind on failure.
   */
  static async start(
    docker: Docker,
    config: Docker.ContainerCreateOptions,
    gate?: EgressGate,
  ): Promise<SessionContainer> {
    const channel = new SessionChannel(channelKey(config.Labels, config.name ?? '?'));
    let attached: AttachedContainer;
    try {
      attached = await AttachedContainer.start(docker, config, (b) => channel.push(b));
    } catch (e) {
      await gate?.close();
      throw e;
    }
    const self = new SessionContainer(attached, config.Image ?? '?', channel);
    self.gate = gate;
    return self;
  }

  /** Attaches to a running session container another gateway made: no ready frame comes, a resync must. */
  static async adopt(docker: Docker, found: Docker.ContainerInfo): Promise<SessionContainer> {
    const channel = new SessionChannel(channelKey(found.Labels, found.Id));
    channel.adopted();
    const attached = await AttachedContainer.attachTo(docker.getContainer(found.Id), (b) => channel.push(b));
    return new SessionContainer(attached, found.Image, channel);
  }

  get container(): Docker.Container {
    return this.attached.container;
  }

  get alive(): boolean {
    return this.attached.alive;
  }

  get ended(): Promise<void> {
    return this.attached.ended;
  }

  get gone(): Promise<void> {
    return this.attached.ended;
  }

  /** The runner's session protocol, once it said it is ready (adopted: the oldest accepted). */
  protocol(): Promise<number | undefined> {
    return this.channel.protocol();
  }

  /**
   * True once the runner waits for a session, false when the container ended first; throws
   * IMAGE_OUTDATED when the image's runner has no session mode, or an older one.
   */
  ready(): Promise<boolean> {
    return this.channel.ready(this.image, () => this.attached.stderr);
  }

  /** The client of this container's runner. */
  connect(): SessionClient {
    return this.channel.connect((parts) => this.attached.write(parts), this.attached.alive);
  }

  diagnosis(message: string): string {
    return this.attached.diagnosis(message);
  }

  /**
   * How the session ended, once its container stopped: the runner's record, else OOM or its exit
   * status; or the engine's end, when the container was stopped or lost while the engine went away.
   */
  async endOf(own: SandboxEnd | undefined): Promise<SandboxEnd> {
    return weighEngine(own ?? (await this.exitEnd()), () => containerEngineAnswers(this.container));
  }

  /** The end the engine tells of the stopped container (its exit status, OOM), or that it is gone. */
  private async exitEnd(): Promise<SandboxEnd> {
    const info = await within(
      (async () => {
        await (this.container.wait() as Promise<unknown>).catch(() => undefined);
        return this.container.inspect();
      })(),
      EXIT_WAIT_MS,
    ).catch(() => undefined);
    if (!info) return { reason: 'RunnerGone', message: this.diagnosis("the session's container is gone") };
    const end = sessionEnd({ exitCode: info.State.ExitCode, oomKilled: info.State.OOMKilled });
    return end ?? { reason: 'RunnerGone', message: 'the runner was never opened' };
  }

  /** Removes the container, then its gate. Idempotent; never throws. */
  async remove(): Promise<void> {
    await this.attached.remove();
    await this.gate?.close().catch(() => {});
  }

  /** A container that ended by itself is removed: Docker keeps no record of a session. */
  retire(): Promise<void> {
    return this.remove();
  }

  /** Leaves the container running, attached to nothing (its gate's directory kept): a restarted gateway adopts it. */
  detach(): void {
    this.attached.detach();
    this.gate?.release();
  }
}

/**
 * A session's end, weighed against its engine: stopped from outside or lost while the engine does
 * not answer (asked only then), the engine took it.
 */
export async function weighEngine(
  end: SandboxEnd,
  engineAnswers: () => Promise<boolean>,
): Promise<SandboxEnd> {
  if (!ENDS_OF_AN_ENGINE_SHUTDOWN.has(end.reason)) return end;
  return (await engineAnswers()) ? end : ENGINE_RESTARTED;
}

/** The runner's channel key, from the container's label. */
function channelKey(labels: Record<string, string> | undefined, name: string): Buffer {
  const key = Buffer.from(labels?.[LABELS.channelKey] ?? '', 'hex');
  if (key.length !== KEY_BYTES)
    throw new AppError('BACKEND_ERROR', `session container ${name} has no channel key label`);
  return key;
}
