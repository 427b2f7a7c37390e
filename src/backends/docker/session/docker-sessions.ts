/**
 * Sessions on Docker (DESIGN.md §6): one hardened container per session, from a session pool or
 * cold, whose runner serves the session's requests on its attached stdin. The session's record
 * (id, owner, spec) travels to the runner in its open request, so that a restarted gateway with
 * the same instance id can adopt it from the runner itself, warm-pool containers included (their
 * labels are fixed before anyone claims them).
 */
import type Docker from 'dockerode';
import * as z from 'zod';
import { SESSION_ID_PATTERN } from '../../../api/session.js';
import type { Logger } from '../../../observability/logger.js';
import type { EffectiveSessionSpec } from '../../../policy/session.js';
import { newKey } from '../../../runner/session-protocol.js';
import type { EgressGate, SocketGates } from '../../../egress/socket-gates.js';
import { createTenant } from '../../../egress/tenant.js';
import { cancelled } from '../../../shared/abort.js';
import { AppError } from '../../../shared/errors.js';
import { withTimeout } from '../../../shared/time.js';
import { adoptedSpec, SessionMetaSchema, type SessionMeta } from '../../session-meta.js';
import { bindSessionGate, openGate } from '../../egress-gates.js';
import { openRunnerSession } from '../../session-channel.js';
import { RunnerSession } from '../../session-sandbox.js';
import type {
  AdoptedSession,
  Adoption,
  LostSession,
  SessionBackend,
  SessionOptions,
  SessionSandbox,
} from '../../sessions.js';
import { buildContainerConfig } from '../container-config.js';
import type { SandboxShape } from '../../../policy/shape.js';
import { LABELS, MANAGED_FILTER } from '../labels.js';
import type { PoolManager } from '../pool/pool-manager.js';
import { SessionContainer } from './session-container.js';
import { sessionEnd } from '../../../runner/session-end.js';

/** How long a runner found at start-up has to answer the resync before it counts as gone. */
const RESYNC_TIMEOUT_MS = 10_000;
/** A cold container's runner exits if nobody opens its session in this time (a crash mid-create). */
const COLD_OPEN_WITHIN_SECONDS = 60;
export const SESSION_NAME_PREFIX = 'sandpit-session-';

export interface DockerSessionsDeps {
  docker: Docker;
  owner: string;
  /** Sessions made with an instance id are adopted by the next gateway with it; without, they end with their owner. */
  instanceId: string | undefined;
  pool: PoolManager | undefined;
  /** The egress proxy's per-sandbox sockets, for sessions with an allowlist. */
  gates?: SocketGates | undefined;
  logger?: Logger | undefined;
}

export function sessionShape(spec: EffectiveSessionSpec): SandboxShape {
  return {
    template: spec.template,
    image: spec.image,
    runtime: spec.runtime,
    workdir: spec.workdir,
    limits: spec.limits,
    network: { egress: spec.network.egress },
  };
}

export class DockerSessions implements SessionBackend {
  private readonly deps: DockerSessionsDeps;
  /** The sessions this process holds, with their containers' ids. */
  private readonly live = new Map<string, { session: RunnerSession; containerId: string }>();

  constructor(deps: DockerSessionsDeps) {
    this.deps = deps;
  }

  /** Ids of the containers behind the sessions this process holds (the reaper leaves them alone). */
  liveContainers(): Set<string> {
    return new Set([...this.live.values()].map((s) => s.containerId));
  }

  get size(): number {
    return this.live.size;
  }

  async createSession(spec: EffectiveSessionSpec, options: SessionOptions): Promise<SessionSandbox> {
    const { sessionId, principal, signal } = options;
    if (!SESSION_ID_PATTERN.test(sessionId))
      throw new AppError(
        'INVALID_REQUEST',
        `session id ${JSON.stringify(sessionId)} is not a valid container name`,
      );
    if (signal?.aborted) throw cancelled(signal);
    const shape = sessionShape(spec);
    const warm = this.claimWarm(shape, sessionId);
    const container = warm ?? (await this.startCold(shape, options));
    const meta = { sessionId, principal, createdAt: Date.now() };
    try {
      const session = await openRunnerSession(container, spec, {
        meta,
        served: warm ? 'warm' : 'cold',
        signal,
        bindEgress: () => bindSessionGate(container, spec, meta),
      });
      this.track(session, container);
      return session;
    } catch (e) {
      await container.remove();
      throw e;
    } finally {
      if (warm) this.deps.pool?.replenish();
    }
  }

  private async startCold(shape: SandboxShape, options: SessionOptions): Promise<SessionContainer> {
    const gate = await openGate(this.deps.gates, shape, 'session');
    return SessionContainer.start(this.deps.docker, this.coldConfig(shape, options, gate), gate);
  }

  private coldConfig(
    shape: SandboxShape,
    options: SessionOptions,
    gate: EgressGate | undefined,
  ): Docker.ContainerCreateOptions {
    return buildContainerConfig(shape, {
      egressDir: gate?.dir,
      name: `${SESSION_NAME_PREFIX}${options.sessionId}`,
      kind: 'session',
      owner: this.deps.owner,
      mode: 'session',
      session: {
        sessionId: options.sessionId,
        principal: options.principal,
        instance: this.deps.instanceId,
        openWithinSeconds: COLD_OPEN_WITHIN_SECONDS,
        key: newKey(),
      },
    });
  }

  /** A ready session-pool container of this shape, renamed after the session it now serves. */
  private claimWarm(shape: SandboxShape, sessionId: string): SessionContainer | undefined {
    for (;;) {
      const container = this.deps.pool?.claimSession(shape);
      if (!container) return undefined;
      if (container.alive) {
        container.container.rename({ name: `${SESSION_NAME_PREFIX}${sessionId}` }).catch(() => {});
        return container;
      }
      void container.remove();
    }
  }

  private track(session: RunnerSession, container: SessionContainer): void {
    this.live.set(session.sessionId, { session, containerId: container.container.id });
    void session.done.then(() => {
      if (this.live.get(session.sessionId)?.session === session) this.live.delete(session.sessionId);
    });
  }

  async adoptSessions(): Promise<Adoption> {
    const { docker, instanceId } = this.deps;
    if (!instanceId) return { adopted: [], lost: [] };
    const found = await docker.listContainers({
      all: true,
      filters: { label: [MANAGED_FILTER, `${LABELS.mode}=session`, `${LABELS.instance}=${instanceId}`] },
    });
    const results = await Promise.all(
      found.filter((c) => !this.liveContainers().has(c.Id)).map((c) => this.adoptOne(c)),
    );
    const adoption: Adoption = { adopted: [], lost: [] };
    for (const r of results) {
      if (r && 'sandbox' in r) adoption.adopted.push(r);
      else if (r) adoption.lost.push(r);
    }
    return adoption;
  }

  /** One container of this instance: re-attached, or removed (and reported lost when it was a session). */
  private async adoptOne(c: Docker.ContainerInfo): Promise<AdoptedSession | LostSession | undefined> {
    const named = namedSession(c);
    const lost = async (
      container: SessionContainer | undefined,
      reason: LostSession['reason'],
      message: string,
    ) => {
      await (container?.remove() ??
        this.deps.docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => {}));
      return named.sessionId ? { ...named, reason, message } : undefined;
    };
    if (c.State !== 'running') {
      const info = await this.deps.docker
        .getContainer(c.Id)
        .inspect()
        .catch(() => undefined);
      const end = info && sessionEnd({ exitCode: info.State.ExitCode, oomKilled: info.State.OOMKilled });
      return lost(undefined, end?.reason ?? 'RunnerGone', end?.message ?? 'the session container is gone');
    }
    let container: SessionContainer | undefined;
    try {
      container = await SessionContainer.adopt(this.deps.docker, c);
      const client = container.connect();
      const info = await withTimeout(
        client.resync(),
        RESYNC_TIMEOUT_MS,
        "the session's runner did not answer",
      );
      if (!info.opened) return await lost(container, 'RunnerGone', 'a pool container nobody claimed');
      const meta = SessionMetaSchema.parse(JSON.parse(info.meta ?? ''));
      const spec = adoptedSpec(meta, info.ttlMs);
      if (spec.network.egress === 'allowlist') await this.regate(container, c, { spec, meta });
      const session = new RunnerSession({ sessionId: meta.sessionId, client, host: container, spec });
      this.track(session, container);
      const execs = session.recover(info.execs ?? []);
      this.deps.logger?.info({ sessionId: meta.sessionId, execs: execs.length }, 'adopted a session');
      return {
        sessionId: meta.sessionId,
        principal: meta.principal,
        spec,
        createdAt: meta.createdAt,
        sandbox: session,
        execs,
      };
    } catch (e) {
      const message =
        e instanceof z.ZodError ? "the runner's session record is malformed" : (e as Error).message;
      return lost(container, e instanceof z.ZodError ? 'ProtocolError' : 'RunnerGone', message);
    }
  }

  /**
   * An adopted egress session's gate: its directory (the container's label) listened in again, and
   * bound to the session. Without the proxy here the session is adopted with no way out.
   */
  private async regate(
    container: SessionContainer,
    c: Docker.ContainerInfo,
    { spec, meta }: { spec: EffectiveSessionSpec; meta: SessionMeta },
  ): Promise<void> {
    const dir = c.Labels[LABELS.egressDir];
    if (!dir || !this.deps.gates) {
      this.deps.logger?.warn(
        { sessionId: meta.sessionId },
        'Adopted an egress session without its gate: it has no way out now',
      );
      return;
    }
    container.gate = await this.deps.gates.reopen(dir);
    container.gate.bind(createTenant({ sessionId: meta.sessionId }, meta.principal, spec.network));
  }

  /** Ends every session this process holds (a stdio gateway's, when it exits). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.live.values()].map((s) => s.session.close('Deleted')));
  }

  /** Lets go of every session, leaving them running for the next gateway of this instance. */
  detachAll(): void {
    for (const s of this.live.values()) s.session.detach();
    this.live.clear();
  }
}

/** The session a container names: its labels (cold), or its name (a claimed pool container). */
export function namedSession(c: Docker.ContainerInfo): Pick<LostSession, 'sessionId' | 'principal'> {
  const name = c.Names[0]?.replace(/^\//, '') ?? '';
  const fromName = name.startsWith(SESSION_NAME_PREFIX) ? name.slice(SESSION_NAME_PREFIX.length) : undefined;
  return { sessionId: c.Labels[LABELS.session] ?? fromName, principal: c.Labels[LABELS.principal] };
}
