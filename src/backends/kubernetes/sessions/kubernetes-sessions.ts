/**
 * Sessions on Kubernetes (DESIGN.md §3): a session is a Sandbox object that the operator
 * reconciles into a long-lived, hardened pod whose runner serves the session protocol on its
 * attached stdin. The gateway creates the Sandbox, waits for Ready by watch, creates the session's
 * Lease (the runner's channel key on it), checks that the pod is the Sandbox's own, attaches, and
 * opens the session (variables and secrets in the open request only, as on Docker; with an egress
 * allowlist, the names of the proxy variables its pod has from its Secret: open-session.ts).
 *
 * Any replica can serve any session: what it needs is in the Sandbox (owner, pod), the Lease (who
 * is attached, the key) and the runner (the session record, its execs). A restarted replica finds
 * its sessions by their Sandboxes, never by memory (adoptSessions); another one finds a session it
 * was asked for by name (findSession) and takes it over when its holder lets go.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import * as z from 'zod';
import { SESSION_ID_PATTERN } from '../../../api/session.js';
import { ANNOTATION_PRINCIPAL, LABEL_MANAGED_BY } from '../../../api/v1alpha1/labels.js';
import { IDLE_SLACK_SECONDS, MIN_IDLE_TIMEOUT_SECONDS, SANDBOX } from '../../../api/v1alpha1/sandbox.js';
import { collectionPath, customPrefix, type KubeClient } from '../../../kube/client.js';
import type { Logger } from '../../../observability/logger.js';
import type { EffectiveSessionSpec } from '../../../policy/session.js';
import { newKey } from '../../../runner/session-protocol.js';
import { cancelled } from '../../../shared/abort.js';
import { AppError, toAppError } from '../../../shared/errors.js';
import { withTimeout } from '../../../shared/time.js';
import { adoptedSpec, SessionMetaSchema, type SessionMeta } from '../../session-meta.js';
import type {
  AdoptedSession,
  Adoption,
  ListedSession,
  SessionBackend,
  SessionOptions,
  SessionSandbox,
} from '../../sessions.js';
import { LABEL_PRINCIPAL, MANAGED_BY_GATEWAY, principalLabelValue } from '../build-sandbox-run.js';
import { gatewayError } from '../errors.js';
import { followObject } from '../follow-object.js';
import { buildSandbox } from './build-sandbox.js';
import { LeasedSession, servedOf, verifiedPod, type LeasedSessionDeps } from './leased-session.js';
import { listedSession } from './listed-session.js';
import { kubernetesOpenRequest, openFailure } from './open-session.js';
import { deleteSandbox, PodChannel, type SandboxRef } from './pod-channel.js';
import { sandboxFailure, type SandboxObject } from './sandbox-checks.js';
import { SessionLease } from './session-lease.js';

const OPEN_TIMEOUT_MS = 10_000;
/** On top of the pending timeout: the operator's reaction, the runner's start. */
const READY_SLACK_SECONDS = 30;

export interface KubernetesSessionsOptions {
  kube: KubeClient;
  /** Where sessions are made unless the caller names its tenant's namespace. */
  namespace: string;
  /** The tenants' namespaces (auth.tokens[].namespace): start-up adoption looks there too. */
  tenantNamespaces?: readonly string[] | undefined;
  /** This replica's identity on session Leases; a fresh one per process when absent. */
  holder?: string | undefined;
  ttlSecondsAfterFinished: number;
  pendingTimeoutSeconds: number;
  labels?: Readonly<Record<string, string>> | undefined;
  /** How long a replica stays attached after a session's last request (default 5 s). */
  lingerMs?: number | undefined;
  /** How long a request waits for the replica holding the session to let go (default 15 s). */
  takeWaitMs?: number | undefined;
  watchTimeoutSeconds?: number | undefined;
  logger?: Logger | undefined;
}

/** This process's identity on Leases: its host (the pod's name) and a random part (a restart is another replica). */
export function replicaIdentity(): string {
  return `${hostname()}-${randomBytes(4).toString('hex')}`;
}

export class KubernetesSessions implements SessionBackend {
  readonly minIdleTimeoutSeconds = MIN_IDLE_TIMEOUT_SECONDS;
  /** The operator expires an idle session up to IDLE_SLACK_SECONDS after its deadline: look that often. */
  readonly endCheckMs = IDLE_SLACK_SECONDS * 1000;
  readonly holder: string;
  private readonly o: KubernetesSessionsOptions;
  private readonly deps: LeasedSessionDeps;
  /** The sessions this process serves (held or not). */
  private readonly live = new Map<string, LeasedSession>();

  constructor(options: KubernetesSessionsOptions) {
    this.o = options;
    this.holder = options.holder ?? replicaIdentity();
    this.deps = {
      kube: options.kube,
      holder: this.holder,
      lingerMs: options.lingerMs ?? 5000,
      takeWaitMs: options.takeWaitMs ?? 15_000,
      logger: options.logger,
    };
  }

  private context(verb: string, resource: string, namespace: string) {
    return { verb, resource, namespace, server: this.o.kube.server };
  }

  async createSession(spec: EffectiveSessionSpec, options: SessionOptions): Promise<SessionSandbox> {
    const { sessionId, principal, signal } = options;
    const namespace = options.namespace ?? this.o.namespace;
    if (
      !SESSION_ID_PATTERN.test(sessionId) ||
      !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(sessionId) ||
      sessionId.length > 63
    )
      throw new AppError(
        'INVALID_REQUEST',
        `session id ${JSON.stringify(sessionId)} is not a valid object name`,
      );
    if (signal?.aborted) throw cancelled(signal);
    const kube = this.o.kube;
    const createdAt = options.createdAt ?? Date.now();
    const body = buildSandbox(spec, {
      sessionId,
      namespace,
      principal,
      createdAt,
      ttlSecondsAfterFinished: this.o.ttlSecondsAfterFinished,
      pendingTimeoutSeconds: this.o.pendingTimeoutSeconds,
      ...(this.o.labels ? { labels: this.o.labels } : {}),
    });
    let created: SandboxObject;
    try {
      created = await kube.createObject<SandboxObject>(SANDBOX, namespace, body);
    } catch (e) {
      throw gatewayError(e, this.context('create', 'sandboxes', namespace));
    }
    const uid = created.metadata?.uid ?? '';
    const gone = (): Promise<void> => deleteSandbox(kube, { namespace, name: sessionId, uid });
    try {
      await this.waitReady(
        { namespace, name: sessionId, resourceVersion: created.metadata?.resourceVersion },
        spec,
        signal,
      );
      const { sandbox, podName } = await verifiedPod(kube, { namespace, name: sessionId }, principal);
      const ref: SandboxRef = { namespace, name: sessionId, uid, podName };
      const key = newKey();
      const lease = await SessionLease.create(
        kube,
        { namespace, name: sessionId, sandboxUid: uid, holder: this.holder, key, now: Date.now() },
        this.o.logger,
      );
      const channel = await PodChannel.attach(kube, ref, key);
      const meta = { sessionId, principal, createdAt };
      await withTimeout(
        channel.client.open(kubernetesOpenRequest(spec, meta)).catch((e: unknown) => {
          throw openFailure(e, spec);
        }),
        OPEN_TIMEOUT_MS,
        "the session's runner did not answer its open request",
      );
      const session = new LeasedSession(this.deps, { ref, principal, spec, served: servedOf(sandbox) });
      session.adoptHeld(lease, channel);
      this.track(session);
      return session;
    } catch (e) {
      await gone();
      throw e instanceof AppError ? e : gatewayError(e, this.context('create', 'sessions', namespace));
    }
  }

  /** Waits by watch until the operator says Ready; a Sandbox that failed first throws its typed error. */
  private async waitReady(
    {
      namespace,
      name,
      resourceVersion,
    }: { namespace: string; name: string; resourceVersion: string | undefined },
    spec: EffectiveSessionSpec,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const stop = new AbortController();
    const onAbort = (): void => stop.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const timeoutMs = (this.o.pendingTimeoutSeconds + READY_SLACK_SECONDS) * 1000;
    const timer = setTimeout(() => stop.abort(), timeoutMs);
    let last: SandboxObject | undefined;
    try {
      const end = await followObject<SandboxObject>(this.o.kube, {
        path: collectionPath(customPrefix(SANDBOX), SANDBOX.plural, namespace),
        name,
        resourceVersion,
        get: () => this.o.kube.getObject<SandboxObject>(SANDBOX, namespace, name),
        onObject: (obj) => {
          last = obj;
          const phase = obj.status?.phase;
          return phase !== undefined && phase !== 'Creating';
        },
        watchTimeoutSeconds: this.o.watchTimeoutSeconds ?? 60,
        signal: stop.signal,
        context: this.context('watch', 'sandboxes', namespace),
      });
      if (signal?.aborted) throw cancelled(signal);
      if (end === 'deleted')
        throw new AppError('BACKEND_ERROR', `the Sandbox ${namespace}/${name} was deleted while it started`);
      if (end === 'aborted')
        throw new AppError(
          'ENGINE_UNAVAILABLE',
          `the Sandbox ${namespace}/${name} was not ready within ${timeoutMs / 1000} s`,
          {
            hint: last?.status
              ? `its status: ${JSON.stringify(last.status)}`
              : 'no operator gave it a status: is the sandpit operator running (deploy/README.md)?',
          },
        );
      const status = last?.status ?? {};
      if (status.phase !== 'Ready') throw sandboxFailure(status, spec.image);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private track(session: LeasedSession): void {
    this.live.set(session.sessionId, session);
    void session.ended.then(() => {
      if (this.live.get(session.sessionId) === session) this.live.delete(session.sessionId);
    });
  }

  /** The gateway's Sandboxes in `namespace` (of one principal, when given), every page. */
  private async sandboxes(namespace: string, principal?: string): Promise<SandboxObject[]> {
    const sandboxes: SandboxObject[] = [];
    const owner = principal === undefined ? '' : `,${LABEL_PRINCIPAL}=${principalLabelValue(principal)}`;
    let continueToken: string | undefined;
    try {
      do {
        const page = await this.o.kube.listObjects<SandboxObject>(SANDBOX, {
          namespace,
          labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY_GATEWAY}${owner}`,
          continueToken,
        });
        sandboxes.push(...page.items);
        continueToken = page.continueToken;
      } while (continueToken);
    } catch (e) {
      throw gatewayError(e, this.context('list', 'sandboxes', namespace));
    }
    return sandboxes;
  }

  /** The principal's sessions in its namespace as their Sandboxes say, ended ones included; none is attached to. */
  async listSessions(principal: string, namespace = this.o.namespace): Promise<ListedSession[]> {
    return (await this.sandboxes(namespace, principal)).flatMap((s) => listedSession(s, principal) ?? []);
  }

  /**
   * The gateway's live Sandboxes, in its namespace and every tenant's, that no live replica holds,
   * taken over: a restarted gateway loses no session. Those held by a live replica are that
   * replica's.
   */
  async adoptSessions(): Promise<Adoption> {
    const namespaces = [...new Set([this.o.namespace, ...(this.o.tenantNamespaces ?? [])])];
    const sandboxes: SandboxObject[] = [];
    for (const namespace of namespaces) sandboxes.push(...(await this.sandboxes(namespace)));
    const adoption: Adoption = { adopted: [], lost: [] };
    for (const sandbox of sandboxes) {
      const name = sandbox.metadata?.name ?? '';
      if (sandbox.status?.phase !== 'Ready' || this.live.has(name)) continue;
      const found = await this.take(sandbox, { waitMs: 0 }).catch((e: unknown) => {
        const err = toAppError(e);
        if (err.code !== 'BUSY')
          this.o.logger?.warn({ sessionId: name, err: err.message }, 'could not adopt a session');
        return undefined;
      });
      if (found) adoption.adopted.push(found);
    }
    return adoption;
  }

  /**
   * A session this replica does not serve, found by its Sandbox (in the tenant's namespace) and
   * taken over for `principal`; NOT_FOUND when there is none, or it is another principal's.
   */
  async findSession(
    sessionId: string,
    principal: string,
    namespace = this.o.namespace,
  ): Promise<AdoptedSession> {
    const sandbox = await this.o.kube
      .getObject<SandboxObject>(SANDBOX, namespace, sessionId)
      .catch((e: unknown) => {
        throw gatewayError(e, this.context('get', 'sandboxes', namespace));
      });
    const owner = sandbox?.metadata?.annotations?.[ANNOTATION_PRINCIPAL];
    if (
      !sandbox ||
      owner !== principal ||
      sandbox.metadata?.labels?.[LABEL_MANAGED_BY] !== MANAGED_BY_GATEWAY
    )
      throw new AppError('NOT_FOUND', `no session ${sessionId}`);
    if (this.live.has(sessionId))
      throw new AppError('INVALID_REQUEST', `session ${sessionId} is served by this replica already`);
    return this.take(sandbox, { waitMs: this.deps.takeWaitMs });
  }

  private async take(sandbox: SandboxObject, o: { waitMs: number }): Promise<AdoptedSession> {
    const meta = sandbox.metadata ?? {};
    const namespace = meta.namespace ?? this.o.namespace;
    const name = meta.name ?? '';
    const principal = meta.annotations?.[ANNOTATION_PRINCIPAL] ?? '';
    const ref: SandboxRef = { namespace, name, uid: meta.uid ?? '', podName: sandbox.status?.podName ?? '' };
    const session = new LeasedSession(
      { ...this.deps, takeWaitMs: o.waitMs },
      { ref, principal, served: servedOf(sandbox) },
    );
    let record: SessionMeta | undefined;
    const { info, execs } = await session.holdAndRecover((resynced) => {
      record = sessionRecord(resynced.meta, { namespace, name, principal });
      return adoptedSpec(record, resynced.ttlMs);
    });
    if (!record) throw new AppError('INTERNAL', 'no session record');
    const spec = adoptedSpec(record, info.ttlMs);
    this.track(session);
    this.o.logger?.info({ sessionId: name, execs: execs.length, holder: this.holder }, 'took over a session');
    return { sessionId: name, principal, spec, createdAt: record.createdAt, sandbox: session, execs };
  }

  /** Lets go of every session (detached, Leases released) for the next replica: a graceful shutdown. */
  async detachAll(): Promise<void> {
    await Promise.all([...this.live.values()].map((s) => s.letGo()));
    this.live.clear();
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.live.values()].map((s) => s.close('Deleted')));
  }
}

/** The runner's record of the session, checked against the Sandbox it runs for. */
function sessionRecord(
  meta: string | undefined,
  sandbox: { namespace: string; name: string; principal: string },
): SessionMeta {
  let record: SessionMeta;
  try {
    record = SessionMetaSchema.parse(JSON.parse(meta ?? ''));
  } catch (e) {
    throw new AppError(
      'BACKEND_ERROR',
      e instanceof z.ZodError ? "the runner's session record is malformed" : (e as Error).message,
    );
  }
  if (record.sessionId !== sandbox.name || record.principal !== sandbox.principal)
    throw new AppError(
      'FORBIDDEN',
      `the runner in Sandbox ${sandbox.namespace}/${sandbox.name} holds another session's record`,
    );
  return record;
}
