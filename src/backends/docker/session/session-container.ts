/**
 * One session's container: started cold, claimed from a session pool, or re-attached after a
 * gateway restart. It hands the runner's byte stream to a SessionClient once the runner said it is
 * ready (or, when adopted, at once: the resync then comes first), and tells how it ended.
 */
import type Docker from 'dockerode';
import { SessionClient } from '../../../runner/session-client.js';
import {
  KEY_BYTES,
  MIN_SESSION_PROTOCOL_VERSION,
  READY_FRAME_BYTES,
  readyFrameVersion,
} from '../../../runner/session-protocol.js';
import { AppError } from '../../../shared/errors.js';
import { within } from '../../../shared/time.js';
import type { SandboxEnd } from '../../sessions.js';
import type { SessionHost } from '../../session-sandbox.js';
import type { EgressGate } from '../../../egress/socket-gates.js';
import { AttachedContainer } from '../attached-container.js';
import { LABELS } from '../labels.js';
import { sessionEnd } from '../../../runner/session-end.js';

/** How long an ended container is given to report its exit status. */
const EXIT_WAIT_MS = 3000;

export class SessionContainer implements SessionHost {
  /** An egress session's door to the proxy (bound once the session opens); none without egress. */
  gate: EgressGate | undefined;
  private readonly attached: AttachedContainer;
  private readonly image: string;
  /** The runner's channel key, from the container's label. */
  private readonly key: Buffer;
  private head: Buffer[] = [];
  private headBytes = 0;
  /** Leading bytes that are the ready frame: none when adopted (the runner sent it long ago). */
  private readyBytes = READY_FRAME_BYTES;
  private client: SessionClient | undefined;
  private readyResolve!: (version: number | undefined) => void;
  private readonly version = new Promise<number | undefined>((r) => (this.readyResolve = r));

  private constructor(
    attached: AttachedContainer,
    image: string,
    labels: Record<string, string> | undefined,
  ) {
    this.attached = attached;
    this.image = image;
    const key = Buffer.from(labels?.[LABELS.channelKey] ?? '', 'hex');
    if (key.length !== KEY_BYTES)
      throw new AppError(
        'BACKEND_ERROR',
        `session container ${attached.container.id} has no channel key label`,
      );
    this.key = key;
    void attached.ended.then(() => {
      this.readyResolve(undefined);
      this.client?.transportClosed('the container stopped');
    });
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
    const early = new EarlyBytes();
    let attached: AttachedContainer;
    try {
      attached = await AttachedContainer.start(docker, config, early.sink);
    } catch (e) {
      await gate?.close();
      throw e;
    }
    const self = new SessionContainer(attached, config.Image ?? '?', config.Labels);
    self.gate = gate;
    early.hand((b) => self.onStdout(b));
    return self;
  }

  /** Attaches to a running session container another gateway made: no ready frame comes, a resync must. */
  static async adopt(docker: Docker, found: Docker.ContainerInfo): Promise<SessionContainer> {
    const early = new EarlyBytes();
    const attached = await AttachedContainer.attachTo(docker.getContainer(found.Id), early.sink);
    const self = new SessionContainer(attached, found.Image, found.Labels);
    self.readyBytes = 0;
    self.readyResolve(MIN_SESSION_PROTOCOL_VERSION);
    early.hand((b) => self.onStdout(b));
    return self;
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

  private onStdout(b: Buffer): void {
    if (this.client) return this.client.push(b);
    const before = this.headBytes;
    this.head.push(b);
    this.headBytes += b.length;
    if (before >= this.readyBytes || this.headBytes < this.readyBytes) return;
    const joined = Buffer.concat(this.head);
    this.head = [joined];
    this.readyResolve(readyFrameVersion(joined) ?? -1);
  }

  /** The runner's session protocol, once it said it is ready (adopted: the oldest accepted). */
  async protocol(): Promise<number | undefined> {
    return this.version;
  }

  /**
   * True once the runner waits for a session, false when the container ended first; throws
   * IMAGE_OUTDATED when the image's runner has no session mode, or an older one.
   */
  async ready(): Promise<boolean> {
    const version = await this.version;
    const outdated = (why: string): AppError =>
      new AppError('IMAGE_OUTDATED', `the runner in image ${this.image} ${why}`, {
        hint: 'rebuild the sandbox images: `sandpit images build`',
      });
    if (version === undefined) {
      if (/usage: sandpit-runner/.test(this.attached.stderr)) throw outdated('has no session mode');
      return false;
    }
    if (version < MIN_SESSION_PROTOCOL_VERSION)
      throw outdated(
        `speaks session protocol ${version}; this sandpit needs ${MIN_SESSION_PROTOCOL_VERSION} or later`,
      );
    return true;
  }

  /** The client of this container's runner, whose records start with `key`. */
  connect(): SessionClient {
    const client = new SessionClient({ write: (parts) => this.attached.write(parts) }, this.key);
    const rest = Buffer.concat(this.head).subarray(this.readyBytes);
    this.head = [];
    this.client = client;
    if (!this.attached.alive) client.transportClosed('the container stopped');
    else if (rest.length) client.push(rest);
    return client;
  }

  diagnosis(message: string): string {
    return this.attached.diagnosis(message);
  }

  /** How the session ended, once its container stopped: the runner's record, else OOM or its exit status. */
  async endOf(own: SandboxEnd | undefined): Promise<SandboxEnd> {
    if (own) return own;
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

/** Bytes that arrive before their reader exists, kept and then handed over in order. */
class EarlyBytes {
  private kept: Buffer[] = [];
  private to: ((b: Buffer) => void) | undefined;
  readonly sink = (b: Buffer): void => {
    if (this.to) this.to(b);
    else this.kept.push(b);
  };

  hand(to: (b: Buffer) => void): void {
    this.to = to;
    for (const b of this.kept) to(b);
    this.kept = [];
  }
}
