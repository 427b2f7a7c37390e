/**
 * The host's side of a session runner's stdout, for backends that hold its stdio (Docker's attach,
 * the OCI backend's pipes): the bytes before the session client exists, the ready frame among them
 * (its protocol version), then the client that reads the rest; and the opening of its session.
 */
import type { EffectiveSessionSpec } from '../policy/session.js';
import { SessionClient } from '../runner/session-client.js';
import {
  MIN_SESSION_PROTOCOL_VERSION,
  READY_FRAME_BYTES,
  readyFrameVersion,
} from '../runner/session-protocol.js';
import { cancelled } from '../shared/abort.js';
import { AppError } from '../shared/errors.js';
import { withTimeout } from '../shared/time.js';
import { openRequest, type SessionMeta } from './session-meta.js';
import { RunnerSession, type SessionHost } from './session-sandbox.js';

export class SessionChannel {
  private readonly key: Buffer;
  private head: Buffer[] = [];
  private headBytes = 0;
  /** Leading bytes that are the ready frame: none when adopted (the runner sent it long ago). */
  private readyBytes = READY_FRAME_BYTES;
  private client: SessionClient | undefined;
  private readyResolve!: (version: number | undefined) => void;
  /** The ready frame's protocol version (-1: not a ready frame); undefined when the sandbox ended first. */
  private readonly version = new Promise<number | undefined>((r) => (this.readyResolve = r));

  /** `key`: the runner's channel key, which starts its records. */
  constructor(key: Buffer) {
    this.key = key;
  }

  /** A runner another gateway opened: no ready frame comes, a resync must. */
  adopted(): void {
    this.readyBytes = 0;
    this.readyResolve(MIN_SESSION_PROTOCOL_VERSION);
  }

  /** The runner's stdout, in order. */
  push(b: Buffer): void {
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
  protocol(): Promise<number | undefined> {
    return this.version;
  }

  /** The sandbox stopped: nothing more comes. */
  stopped(): void {
    this.readyResolve(undefined);
    this.client?.transportClosed('the container stopped');
  }

  /**
   * True once the runner waits for a session, false when the sandbox ended first; throws
   * IMAGE_OUTDATED when the image's runner has no session mode (`stderr` says its usage), or an
   * older one.
   */
  async ready(image: string, stderr: () => string): Promise<boolean> {
    const version = await this.version;
    const outdated = (why: string): AppError =>
      new AppError('IMAGE_OUTDATED', `the runner in image ${image} ${why}`, {
        hint: 'rebuild the sandbox images: `sandpit images build`',
      });
    if (version === undefined) {
      if (/usage: sandpit-runner/.test(stderr())) throw outdated('has no session mode');
      return false;
    }
    if (version < MIN_SESSION_PROTOCOL_VERSION)
      throw outdated(
        `speaks session protocol ${version}; this sandpit needs ${MIN_SESSION_PROTOCOL_VERSION} or later`,
      );
    return true;
  }

  /** The client of the runner, writing with `write`; `alive`: whether the sandbox still runs. */
  connect(write: (parts: readonly Buffer[]) => Promise<void>, alive: boolean): SessionClient {
    const client = new SessionClient({ write }, this.key);
    const rest = Buffer.concat(this.head).subarray(this.readyBytes);
    this.head = [];
    this.client = client;
    if (!alive) client.transportClosed('the container stopped');
    else if (rest.length) client.push(rest);
    return client;
  }
}

const READY_TIMEOUT_MS = 30_000;
const OPEN_TIMEOUT_MS = 10_000;

/** A session sandbox whose runner's stdio its backend holds: a SessionChannel behind it. */
export interface ChannelHost extends SessionHost {
  /** See SessionChannel.ready(). */
  ready(): Promise<boolean>;
  /** The client of its runner. */
  connect(): SessionClient;
  /** `message`, with what the sandbox wrote to stderr. */
  diagnosis(message: string): string;
}

/**
 * Waits for the runner's ready frame, opens the session (its record travels in the open request),
 * and returns the session over it; aborting `signal` gives up. The caller removes the sandbox on failure.
 */
export async function openRunnerSession(
  host: ChannelHost,
  spec: EffectiveSessionSpec,
  options: {
    meta: Omit<SessionMeta, 'v' | 'spec'>;
    served: 'warm' | 'cold';
    signal?: AbortSignal | undefined;
    /**
     * Binds the sandbox's way to the egress proxy to the session, once its runner is ready: the
     * proxy socket's path inside the sandbox. A session with an allowlist needs it.
     */
    bindEgress?: (() => Promise<string>) | undefined;
  },
): Promise<RunnerSession> {
  const opening = (async () => {
    const ready = await withTimeout(
      host.ready(),
      READY_TIMEOUT_MS,
      'the session container did not report ready',
    );
    if (!ready)
      throw new AppError(
        'BACKEND_ERROR',
        host.diagnosis('the session container stopped before it was ready'),
      );
    const egressSocket = spec.network.egress === 'allowlist' ? await bindEgress(options) : undefined;
    const client = host.connect();
    await withTimeout(
      client.open({ ...openRequest(spec, options.meta), ...(egressSocket ? { egressSocket } : {}) }),
      OPEN_TIMEOUT_MS,
      "the session's runner did not answer its open request",
    );
    return new RunnerSession({
      sessionId: options.meta.sessionId,
      client,
      host,
      spec,
      served: options.served,
    });
  })();
  return options.signal ? raceAbort(opening, options.signal) : opening;
}

function bindEgress(options: { bindEgress?: (() => Promise<string>) | undefined }): Promise<string> {
  if (!options.bindEgress)
    throw new AppError(
      'UNSUPPORTED',
      'this backend gives a session no way to the egress proxy, so it may not have an allowlist',
    );
  return options.bindEgress();
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(cancelled(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
