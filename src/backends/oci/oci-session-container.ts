/**
 * One session's sandbox on the OCI backend: a container whose runner (in session mode) has this
 * process's pipes as its stdio. The runner's stdout goes through a SessionChannel to the session's
 * client. No daemon holds those pipes, so a session cannot outlive the gateway that made it: when
 * this process dies, the runner's stdin ends and the runner ends the session (StdinClosed); what is
 * left is the reaper's.
 */
import type { SessionClient } from '../../runner/session-client.js';
import { sessionEnd } from '../../runner/session-end.js';
import { within } from '../../shared/time.js';
import { SessionChannel, type ChannelHost } from '../session-channel.js';
import type { SandboxEnd } from '../sessions.js';
import type { EgressGate } from '../../egress/socket-gates.js';
import { OciContainer, type OciHost, type OciSandbox } from './oci-container.js';

/** How long an ended container is given to report its exit status. */
const EXIT_WAIT_MS = 3000;
/** The status of a process killed by SIGKILL. */
const KILLED = 137;

export class OciSessionContainer implements ChannelHost {
  private readonly container: OciContainer;
  private readonly channel: SessionChannel;
  private readonly image: string;
  readonly gone: Promise<void>;

  private constructor(container: OciContainer, channel: SessionChannel, image: string) {
    this.container = container;
    this.channel = channel;
    this.image = image;
    this.gone = container.exited.then(() => channel.stopped());
  }

  /** Writes the bundle and starts the runtime; `key` is the runner's channel key (its open request carries it). */
  static async start(
    host: OciHost,
    sandbox: OciSandbox,
    { key, image }: { key: Buffer; image: string },
  ): Promise<OciSessionContainer> {
    const channel = new SessionChannel(key);
    const container = await OciContainer.start(host, sandbox, (b) => channel.push(b));
    return new OciSessionContainer(container, channel, image);
  }

  get id(): string {
    return this.container.id;
  }

  /** An egress session's door to the proxy (bound once the session opens); none without egress. */
  get gate(): EgressGate | undefined {
    return this.container.gate;
  }

  /** The runner's session protocol, once it said it is ready. */
  protocol(): Promise<number | undefined> {
    return this.channel.protocol();
  }

  ready(): Promise<boolean> {
    return this.channel.ready(this.image, () => this.container.stderr);
  }

  connect(): SessionClient {
    return this.channel.connect((parts) => this.container.write(parts), this.container.alive);
  }

  diagnosis(message: string): string {
    return this.container.diagnosis(message);
  }

  /** How the session ended: the runner's record, else OOM (the run's cgroup) or the runtime's exit status. */
  async endOf(own: SandboxEnd | undefined): Promise<SandboxEnd> {
    if (own) return own;
    const exit = await within(this.container.exited, EXIT_WAIT_MS);
    const oomKilled = await this.container.oomKilled();
    const exitCode = exit?.code ?? null;
    if (exitCode === null && !oomKilled)
      return { reason: 'RunnerGone', message: this.diagnosis("the session's container is gone") };
    const end = sessionEnd({ exitCode: exitCode ?? KILLED, oomKilled });
    return end ?? { reason: 'RunnerGone', message: 'the runner was never opened' };
  }

  remove(): Promise<void> {
    return this.container.remove();
  }

  retire(): Promise<void> {
    return this.remove();
  }

  /** The runner's stdio are this process's pipes: a sandbox let go of cannot run on, so it is removed. */
  detach(): void {
    void this.remove();
  }
}
