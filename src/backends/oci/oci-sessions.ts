/**
 * Sessions on the OCI backend: one container per session, made as a run's is (the same builder,
 * root and hardening) with its runner in session mode, serving the session's requests on its stdin
 * (the same protocol and the same RunnerSession as on Docker). A session ends with the gateway
 * that made it (its runner's stdin is that process's pipe), so there is nothing to adopt. A session
 * with an allowlist gets its own egress gate, bound to it once its runner is ready.
 */
import { SESSION_ID_PATTERN } from '../../api/session.js';
import type { EffectiveSessionSpec } from '../../policy/session.js';
import type { SandboxShape } from '../../policy/shape.js';
import { newKey } from '../../runner/session-protocol.js';
import { cancelled } from '../../shared/abort.js';
import { AppError } from '../../shared/errors.js';
import { sessionShape } from '../docker/session/docker-sessions.js';
import { LABELS, MANAGED_BY } from '../docker/labels.js';
import { bindSessionGate } from '../egress-gates.js';
import { openRunnerSession } from '../session-channel.js';
import type { RunnerSession } from '../session-sandbox.js';
import type { Adoption, SessionBackend, SessionOptions, SessionSandbox } from '../sessions.js';
import { containerId } from './layout.js';
import type { OciHost, OciSandbox } from './oci-container.js';
import { OciSessionContainer } from './oci-session-container.js';

/** The runner exits if nobody opens its session in this time (a crash mid-create). */
const OPEN_WITHIN_SECONDS = 60;
/** Extra life a session's expiry annotation gets beyond its TTL. */
const EXPIRY_SLACK_MS = 5 * 60_000;

/**
 * What a sandbox of `shape` is made from: its runtime, container id and config.json, and its
 * egress gate (unbound) when it has an allowlist.
 */
export type BundleMaker = (
  shape: SandboxShape,
  sandbox: { id: string; annotations: Record<string, string>; openWithinSeconds?: number },
) => Promise<OciSandbox>;

export interface OciSessionsDeps {
  host: OciHost;
  owner: string;
  bundle: BundleMaker;
}

export class OciSessions implements SessionBackend {
  private readonly deps: OciSessionsDeps;
  /** The sessions this process holds, with their containers' ids. */
  private readonly live = new Map<string, { session: RunnerSession; containerId: string }>();
  /** Containers of sessions being opened. */
  private readonly opening = new Set<string>();

  constructor(deps: OciSessionsDeps) {
    this.deps = deps;
  }

  /** Ids of the containers behind the sessions this process holds (the reaper leaves them alone). */
  liveContainers(): string[] {
    return [...this.opening, ...[...this.live.values()].map((s) => s.containerId)];
  }

  async createSession(spec: EffectiveSessionSpec, options: SessionOptions): Promise<SessionSandbox> {
    const { sessionId, principal, signal } = options;
    if (!SESSION_ID_PATTERN.test(sessionId))
      throw new AppError(
        'INVALID_REQUEST',
        `session id ${JSON.stringify(sessionId)} cannot name a container`,
      );
    if (signal?.aborted) throw cancelled(signal);
    const createdAt = Date.now();
    const key = newKey();
    const sandbox = await this.deps.bundle(sessionShape(spec), {
      id: containerId(`session-${sessionId}`),
      annotations: {
        [LABELS.managedBy]: MANAGED_BY,
        [LABELS.kind]: 'session',
        [LABELS.mode]: 'session',
        [LABELS.owner]: this.deps.owner,
        [LABELS.session]: sessionId,
        [LABELS.principal]: principal,
        [LABELS.expires]: String(createdAt + spec.ttlSeconds * 1000 + EXPIRY_SLACK_MS),
        ...(spec.template ? { [LABELS.template]: spec.template } : {}),
      },
      openWithinSeconds: OPEN_WITHIN_SECONDS,
    });
    const container = await OciSessionContainer.start(this.deps.host, sandbox, { key, image: spec.image });
    this.opening.add(container.id);
    const meta = { sessionId, principal, createdAt };
    try {
      const session = await openRunnerSession(container, spec, {
        meta,
        served: 'cold',
        signal,
        bindEgress: () => bindSessionGate(container, spec, meta),
      });
      this.track(session, container.id);
      return session;
    } catch (e) {
      await container.remove();
      throw e;
    } finally {
      this.opening.delete(container.id);
    }
  }

  private track(session: RunnerSession, id: string): void {
    this.live.set(session.sessionId, { session, containerId: id });
    void session.done.then(() => {
      if (this.live.get(session.sessionId)?.session === session) this.live.delete(session.sessionId);
    });
  }

  /** Nothing outlives its gateway here: a dead one's sessions ended with it, and the reaper removes them. */
  adoptSessions(): Promise<Adoption> {
    return Promise.resolve({ adopted: [], lost: [] });
  }

  /** Ends every session this process holds. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.live.values()].map((s) => s.session.close('Deleted')));
  }
}
