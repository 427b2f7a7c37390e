/**
 * The session use cases (DESIGN.md §5): create, list, get, extend and delete sessions, exec in
 * them, and move their files. Every transport (MCP, REST, WebSocket, CLI) calls these, so behaviour
 * cannot drift. A session belongs to the principal that created it: any other gets NOT_FOUND.
 *
 * The gateway enforces a session's TTL and idle time from outside; the runner enforces them inside
 * too, so a session ends on time even with no gateway at all.
 */
import { randomBytes } from 'node:crypto';
import {
  ExecRequestSchema,
  SessionPatchSchema,
  SessionRequestSchema,
  fromSeedSessionBody,
  isSessionEnded,
  PATH_RULE,
  toWorkspacePath,
  type ExecResult,
  type FileEntry,
  type Session,
  type SessionReason,
  type SessionState,
} from '../api/session.js';
import { parseInput } from '../api/validate.js';
import type {
  AdoptedSession,
  FileChange,
  ListedSession,
  LostSession,
  SandboxEnd,
  SessionBackend,
  SessionSandbox,
} from '../backends/sessions.js';
import { buildSessionAudit } from '../observability/audit.js';
import { evaluateExec, evaluateSession, factsOf, type EffectiveSessionSpec } from '../policy/session.js';
import { AppError, policyDenied, toAppError } from '../shared/errors.js';
import type { GatewayDeps } from './deps.js';
import type { Principal } from './principal.js';
import { ExecRunner, type ExecHandle, type StartExecOptions } from './session-execs.js';
import { ExecLog, type ExecLogEntry } from './session-log.js';
import { NO_JOURNAL, type JournaledSession, type SessionJournal } from './session-journal.js';
import { sessionView, type ViewedSession } from './session-view.js';

export interface SessionCaps {
  /** Live sessions on this server. */
  max: number;
  /** Live sessions of one principal, unless its token says fewer. */
  maxPerPrincipal: number;
  /** What a session's exec log keeps. */
  logExecs: number;
  logBytes: number;
}

export const DEFAULT_SESSION_CAPS: SessionCaps = {
  max: 16,
  maxPerPrincipal: 16,
  logExecs: 100,
  logBytes: 1024 ** 2,
};

/** Ended sessions kept so that a GET says how they ended. */
const ENDED_KEPT = 256;
/** setTimeout's longest delay; a later deadline is checked again when this one fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** How often an overdue shared session is looked at again when its backend names no interval. */
const DEFAULT_END_CHECK_MS = 10_000;

export interface SessionRecord {
  sessionId: string;
  /** The owning principal's id. */
  owner: string;
  /** Its name, for audit records and logs. */
  principalName: string;
  spec: EffectiveSessionSpec;
  createdAt: number;
  lastActivityAt: number;
  state: SessionState;
  reason: SessionReason;
  message: string | undefined;
  endedAt: number | undefined;
  sandbox: SessionSandbox | undefined;
  execs: ExecRunner;
  log: ExecLog;
  bytesIn: number;
  bytesOut: number;
  timer: NodeJS.Timeout | undefined;
  ending: Promise<void> | undefined;
}

export interface FileWriteInput {
  path: string;
  content: Buffer | AsyncIterable<Buffer>;
  mode?: number | undefined;
  offset?: number | undefined;
  append?: boolean | undefined;
}

export interface FileDownload {
  entry: FileEntry;
  data: AsyncIterable<Buffer>;
}

export function newSessionId(): string {
  return `ses-${randomBytes(8).toString('hex')}`;
}

const stateFor = (reason: SessionReason): SessionState =>
  reason === 'TTLExpired' || reason === 'IdleExpired'
    ? 'Expired'
    : reason === 'Deleted'
      ? 'Deleted'
      : 'Failed';

function pathOf(input: string, field: string, allowRoot = false): string {
  const path = toWorkspacePath(input);
  if (path === undefined || (!allowRoot && path === '')) {
    throw new AppError('INVALID_REQUEST', `invalid ${field}: ${JSON.stringify(input.slice(0, 200))}`, {
      violations: [{ field, message: PATH_RULE }],
      hint: 'name a file inside /workspace, e.g. data/input.csv',
    });
  }
  return path;
}

const notFound = (sessionId: string): AppError =>
  new AppError('NOT_FOUND', `no session ${sessionId}`, {
    hint: 'list your sessions with sandbox_list (GET /sessions); ended ones are kept for a while',
  });

export class SessionUseCases {
  private readonly deps: GatewayDeps;
  private readonly caps: SessionCaps;
  private readonly live = new Map<string, SessionRecord>();
  private readonly ended = new Map<string, SessionRecord>();
  /** Sessions being found through the backend (serve()), so concurrent requests share one take-over. */
  private readonly finding = new Map<string, Promise<void>>();

  private readonly journal: SessionJournal;

  constructor(deps: GatewayDeps, caps: Partial<SessionCaps> = {}, journal: SessionJournal = NO_JOURNAL) {
    this.deps = deps;
    this.caps = { ...DEFAULT_SESSION_CAPS, ...caps };
    this.journal = journal;
  }

  private get backend(): SessionBackend {
    const sessions = this.deps.backend.sessions;
    if (!sessions) {
      throw new AppError('UNSUPPORTED', `the ${this.deps.backend.name} backend has no sessions yet`, {
        hint: 'run sessions on the docker backend (sandbox.backend: docker), or use one-shot runs',
      });
    }
    return sessions;
  }

  /**
   * Creates a session and resolves once its sandbox answers. Rejects before any sandbox exists with
   * INVALID_REQUEST, POLICY_DENIED, AUDIT_UNAVAILABLE or BUSY (naming which cap).
   */
  async create(
    input: unknown,
    principal: Principal,
    options: { signal?: AbortSignal } = {},
  ): Promise<Session> {
    const { audit, logger, metrics, policy } = this.deps;
    let record: SessionRecord;
    try {
      const backend = this.backend;
      const request = parseInput(SessionRequestSchema, fromSeedSessionBody(input), 'session request');
      const evaluation = evaluateSession(request, policy, principal.scope, {
        minIdleTimeoutSeconds: backend.minIdleTimeoutSeconds,
      });
      if (!evaluation.ok) throw policyDenied(evaluation.violations);
      audit.assertAvailable();
      this.checkCaps(principal);
      record = this.newRecord(evaluation.spec, principal);
      this.live.set(record.sessionId, record);
      try {
        record.sandbox = await backend.createSession(record.spec, {
          sessionId: record.sessionId,
          principal: principal.id,
          namespace: principal.namespace,
          createdAt: record.createdAt,
          signal: options.signal,
        });
      } catch (e) {
        this.live.delete(record.sessionId);
        throw toAppError(e, 'BACKEND_ERROR');
      }
    } catch (e) {
      const err = toAppError(e);
      metrics.rejected.inc({ code: err.code });
      logger.info({ principal: principal.name, errorCode: err.code, err: err.message }, 'session refused');
      throw err;
    }
    this.started(record);
    return this.view(record);
  }

  private newRecord(spec: EffectiveSessionSpec, principal: Principal): SessionRecord {
    const now = Date.now();
    return {
      sessionId: newSessionId(),
      owner: principal.id,
      principalName: principal.name,
      spec,
      createdAt: now,
      lastActivityAt: now,
      state: 'Creating',
      reason: 'Created',
      message: undefined,
      endedAt: undefined,
      sandbox: undefined,
      execs: new ExecRunner(),
      log: new ExecLog({ maxExecs: this.caps.logExecs, maxBytes: this.caps.logBytes }),
      bytesIn: 0,
      bytesOut: 0,
      timer: undefined,
      ending: undefined,
    };
  }

  /** Past a cap, BUSY saying which; creating sessions count, so concurrent creates hold the caps exactly. */
  private checkCaps(principal: Principal): void {
    const mine = [...this.live.values()].filter((r) => r.owner === principal.id).length;
    const perPrincipal = principal.maxSessions ?? this.caps.maxPerPrincipal;
    const busy = (message: string) =>
      new AppError('BUSY', `busy, retry later: ${message}`, {
        hint: 'delete a session you no longer need (sandbox_delete, DELETE /sessions/:id), or wait for one to end',
      });
    if (mine >= perPrincipal) throw busy(`"${principal.name}" already has ${mine} live sessions, its limit`);
    if (this.live.size >= this.caps.max) throw busy(`${this.live.size} live sessions, the server's limit`);
  }

  /** A session whose sandbox answers: Ready, timed, audited, and watched for its own end. */
  private started(record: SessionRecord): void {
    const { backend, metrics, logger } = this.deps;
    record.state = 'Ready';
    this.schedule(record);
    void record.sandbox?.ended.then((end: SandboxEnd) =>
      this.end(record, end.reason, end.message, end.recordedElsewhere),
    );
    metrics.liveSessions.inc({ backend: backend.name });
    metrics.sessionsCreated.inc({ backend: backend.name, served: record.sandbox?.served ?? 'cold' });
    this.journal.remember({
      sessionId: record.sessionId,
      owner: record.owner,
      principalName: record.principalName,
      createdAt: record.createdAt,
      spec: factsOf(record.spec),
    });
    this.audit(record, 'Ready', 'Created');
    logger.info(
      { sessionId: record.sessionId, principal: record.principalName, image: record.spec.image },
      'session created',
    );
  }

  /**
   * The live and recently ended sessions of this principal, newest first: those this server
   * serves or saw end as it knows them, and those its backend has a record of that it does not
   * know (on Kubernetes: made or served through another replica), as that record says. Listing
   * takes no session over.
   */
  async list(principal: Principal): Promise<Session[]> {
    const known = [...this.live.values(), ...this.ended.values()].filter((r) => r.owner === principal.id);
    const listed =
      (await this.deps.backend.sessions?.listSessions?.(principal.id, principal.namespace)) ?? [];
    const elsewhere = listed.filter((l) => !this.live.has(l.sessionId) && !this.ended.has(l.sessionId));
    return [...known, ...elsewhere.map(listedRecord)]
      .sort((a, b) => b.createdAt - a.createdAt)
      .map((r) => sessionView(r, this.deps.backend.name));
  }

  /** One session, with the processes that outlived their execs while it is live. */
  async get(sessionId: string, principal: Principal): Promise<Session> {
    await this.serve(sessionId, principal);
    const record = this.find(sessionId, principal);
    if (record.state !== 'Ready' || !record.sandbox) return this.view(record);
    const processes = await record.sandbox.processes().catch(() => undefined);
    return this.view(record, processes);
  }

  /** Throws NOT_FOUND unless the session is live and the principal's (a WebSocket's upgrade). */
  assertLive(sessionId: string, principal: Principal): void {
    this.findLive(sessionId, principal);
  }

  /** A new whole lifetime, counted from creation, within the ceiling. */
  async extend(sessionId: string, principal: Principal, input: unknown): Promise<Session> {
    await this.serve(sessionId, principal);
    const { ttlSeconds } = parseInput(SessionPatchSchema, input, 'session update');
    const record = this.findLive(sessionId, principal);
    const ceiling = this.deps.policy.sessions.maxTtlSeconds;
    if (ttlSeconds > ceiling) {
      throw policyDenied([
        {
          field: 'ttlSeconds',
          message: `${ttlSeconds} is over the limit of ${ceiling}`,
          limit: ceiling,
          requested: ttlSeconds,
        },
      ]);
    }
    if (record.createdAt + ttlSeconds * 1000 <= Date.now()) {
      throw new AppError('INVALID_REQUEST', `a lifetime of ${ttlSeconds} s has already passed`, {
        violations: [
          { field: 'ttlSeconds', message: 'counted from creation, this lifetime is over already' },
        ],
        hint: 'give a longer lifetime, or delete the session',
      });
    }
    await this.sandboxOf(record).setTtl(ttlSeconds);
    record.spec = { ...record.spec, ttlSeconds };
    this.schedule(record);
    return this.view(record);
  }

  /** Ends the session and removes its sandbox; a session that has ended already is returned as it is. */
  async delete(sessionId: string, principal: Principal): Promise<Session> {
    await this.serve(sessionId, principal);
    const record = this.find(sessionId, principal);
    await this.end(record, 'Deleted', 'deleted by its owner');
    return this.view(record);
  }

  /**
   * Starts an exec. Rejects before anything runs with INVALID_REQUEST, POLICY_DENIED,
   * AUDIT_UNAVAILABLE, NOT_FOUND or BUSY (the session's concurrent execs).
   */
  exec(sessionId: string, principal: Principal, input: unknown, options: StartExecOptions = {}): ExecHandle {
    const record = this.findLive(sessionId, principal);
    const request = parseInput(ExecRequestSchema, input, 'exec request');
    const evaluation = evaluateExec(request, record.spec, this.deps.policy);
    if (!evaluation.ok) throw policyDenied(evaluation.violations);
    this.deps.audit.assertAvailable();
    if (record.execs.running.length >= record.spec.maxExecs) {
      throw new AppError(
        'BUSY',
        `busy, retry later: session ${sessionId} already runs ${record.spec.maxExecs} execs, its limit`,
        { hint: 'wait for an exec to finish, or kill a background one' },
      );
    }
    this.touch(record);
    return record.execs.start(this.sandboxOf(record), evaluation.exec, options, {
      deps: this.deps,
      session: record,
      finished: (entry: ExecLogEntry) => {
        record.log.add(entry);
        this.touch(record);
      },
    });
  }

  /**
   * An exec's result: live output so far while it runs, or as its log keeps it. One this server
   * did not run (another replica, before a restart) comes from the runner's history.
   */
  async execResult(sessionId: string, execId: string, principal: Principal): Promise<ExecResult> {
    await this.serve(sessionId, principal);
    const record = this.find(sessionId, principal);
    const now = () =>
      record.execs.current(execId, record, this.deps.backend.name) ?? record.log.get(execId)?.result;
    let result = now();
    if (!result) {
      await this.syncLog(record);
      result = now();
    }
    if (!result) throw new AppError('NOT_FOUND', `no exec ${execId} in session ${sessionId}`);
    return result;
  }

  /** An exec this server just started, now: its output so far (a background exec's answer). */
  startedResult(sessionId: string, execId: string, principal: Principal): ExecResult {
    const record = this.find(sessionId, principal);
    const result =
      record.execs.current(execId, record, this.deps.backend.name) ?? record.log.get(execId)?.result;
    if (!result) throw new AppError('NOT_FOUND', `no exec ${execId} in session ${sessionId}`);
    return result;
  }

  /**
   * Takes into the session's log the execs its runner kept that this server did not run (another
   * replica's, or an earlier server's). Only while it lives: an ended one's runner is gone.
   */
  private async syncLog(record: SessionRecord): Promise<void> {
    const sandbox = record.sandbox;
    if (!sandbox || record.ending || isSessionEnded(record.state)) return;
    const finished = await sandbox.history();
    const running = new Set(record.execs.running);
    record.log.merge(
      finished
        .filter((f) => !running.has(f.execId))
        .map((f) => ExecRunner.logged(f, record, this.deps.backend.name)),
    );
  }

  /** Kills a running exec (its process group) and resolves with its result. */
  async killExec(sessionId: string, execId: string, principal: Principal) {
    await this.serve(sessionId, principal);
    const record = this.find(sessionId, principal);
    const handle = record.execs.get(execId);
    if (!handle) return await this.execResult(sessionId, execId, principal);
    handle.execution.kill();
    return handle.result;
  }

  /** The session's finished execs with their outputs, oldest first: those run elsewhere included. */
  async logs(sessionId: string, principal: Principal): Promise<readonly ExecLogEntry[]> {
    await this.serve(sessionId, principal);
    const record = this.find(sessionId, principal);
    await this.syncLog(record);
    return record.log.list();
  }

  async writeFile(sessionId: string, principal: Principal, write: FileWriteInput): Promise<FileEntry> {
    await this.serve(sessionId, principal);
    const record = this.findLive(sessionId, principal);
    const path = pathOf(write.path, 'path');
    const cap = record.spec.limits.workspaceBytes;
    if (Buffer.isBuffer(write.content) && write.content.length + (write.offset ?? 0) > cap) {
      throw new AppError('TOO_LARGE', `the file would be over the workspace's ${cap} bytes`, {
        violations: [{ field: 'content', message: `${write.content.length} bytes`, limit: cap }],
        hint: 'write less, or create the session with a larger workspace (resources.workspace)',
      });
    }
    this.touch(record);
    let written = 0;
    const content = Buffer.isBuffer(write.content)
      ? ((written = write.content.length), write.content)
      : counted(write.content, (n) => (written += n));
    const entry = await this.sandboxOf(record).writeFile({ ...write, path, data: content });
    record.bytesIn += written;
    this.deps.metrics.fileBytes.inc({ direction: 'in' }, written);
    return entry;
  }

  /** A file to download: TOO_LARGE past `sandbox.maxDownloadBytes` (or `maxBytes`, when less). */
  async readFile(
    sessionId: string,
    principal: Principal,
    read: { path: string; maxBytes?: number | undefined },
  ): Promise<FileDownload> {
    await this.serve(sessionId, principal);
    const record = this.findLive(sessionId, principal);
    const path = pathOf(read.path, 'path');
    const cap = Math.min(this.deps.policy.ceilings.downloadBytes, read.maxBytes ?? Infinity);
    this.touch(record);
    const file = await this.sandboxOf(record).readFile({ path, maxBytes: cap });
    if (file.entry.size > cap || file.entry.type !== 'file') {
      await file.data[Symbol.asyncIterator]().return?.();
      if (file.entry.type !== 'file') {
        throw new AppError('INVALID_REQUEST', `${read.path} is a ${file.entry.type}, not a file`, {
          violations: [{ field: 'path', message: `a ${file.entry.type}` }],
          hint: 'list a directory with sandbox_list_files; download it with the artifacts endpoint',
        });
      }
      throw new AppError(
        'TOO_LARGE',
        `${read.path} is ${file.entry.size} bytes, over the download limit of ${cap}`,
        {
          violations: [{ field: 'path', message: `${file.entry.size} bytes`, limit: cap }],
          hint: 'download it as an artifact in parts, or compress it in the session first',
        },
      );
    }
    return { entry: file.entry, data: this.countedOut(record, file.data) };
  }

  async listFiles(
    sessionId: string,
    principal: Principal,
    list: { path?: string | undefined; recursive?: boolean | undefined } = {},
  ): Promise<FileEntry[]> {
    await this.serve(sessionId, principal);
    const record = this.findLive(sessionId, principal);
    const path = pathOf(list.path ?? '', 'path', true);
    this.touch(record);
    return this.sandboxOf(record).list({ path, recursive: list.recursive ?? false });
  }

  async removeFile(
    sessionId: string,
    principal: Principal,
    remove: { path: string; recursive?: boolean | undefined },
  ): Promise<void> {
    await this.serve(sessionId, principal);
    const record = this.findLive(sessionId, principal);
    const path = pathOf(remove.path, 'path');
    this.touch(record);
    await this.sandboxOf(record).remove({ path, recursive: remove.recursive ?? false });
  }

  async mkdir(sessionId: string, principal: Principal, path: string): Promise<FileEntry> {
    await this.serve(sessionId, principal);
    const record = this.findLive(sessionId, principal);
    this.touch(record);
    return this.sandboxOf(record).mkdir({ path: pathOf(path, 'path') });
  }

  /** Calls `onChange` when a file under `path` changes; the returned function stops watching. */
  async watch(
    sessionId: string,
    principal: Principal,
    path: string,
    onChange: (change: FileChange) => void,
  ): Promise<() => void> {
    await this.serve(sessionId, principal);
    const record = this.findLive(sessionId, principal);
    return this.sandboxOf(record).watch(pathOf(path, 'path', true), onChange);
  }

  /** One path, or the whole workspace, as a tar stream: TOO_LARGE past `sandbox.maxDownloadBytes`. */
  artifacts(sessionId: string, principal: Principal, path = ''): AsyncIterable<Buffer> {
    const record = this.findLive(sessionId, principal);
    const p = pathOf(path, 'path', true);
    this.touch(record);
    const maxBytes = this.deps.policy.ceilings.downloadBytes;
    return this.countedOut(record, this.sandboxOf(record).artifacts({ path: p, maxBytes }));
  }

  /**
   * The sessions this server made before it restarted, adopted: the same ids, owners and files.
   * Those whose runner no longer answered were removed by the backend; they are logged.
   */
  async adopt(): Promise<{ adopted: number; lost: number }> {
    const sessions = this.deps.backend.sessions;
    if (!sessions) return { adopted: 0, lost: 0 };
    const { adopted, lost } = await sessions.adoptSessions();
    const journaled = new Map(this.journal.entries().map((j) => [j.sessionId, j]));
    for (const a of adopted) {
      const name = journaled.get(a.sessionId)?.principalName ?? a.principal;
      journaled.delete(a.sessionId);
      this.takeIn(a, name);
    }
    const gone = [
      ...lost,
      // Remembered, but no sandbox of this instance is left at all (removed while no gateway was there).
      ...[...journaled.keys()]
        .filter((id) => !lost.some((l) => l.sessionId === id))
        .map((sessionId) => ({
          sessionId,
          principal: undefined,
          reason: 'RunnerGone' as const,
          message: 'its sandbox is gone',
        })),
    ];
    for (const l of gone) this.lost(l, l.sessionId === undefined ? undefined : journaled.get(l.sessionId));
    if (adopted.length) this.deps.logger.info({ sessions: adopted.length }, 'adopted live sessions');
    return { adopted: adopted.length, lost: gone.length };
  }

  /** A session this server did not make (an earlier run, another replica), served from now on. */
  private takeIn(a: AdoptedSession, principalName: string): SessionRecord {
    const record: SessionRecord = {
      ...this.newRecord(a.spec, { id: a.principal, name: principalName, scope: {} }),
      sessionId: a.sessionId,
      createdAt: a.createdAt,
      sandbox: a.sandbox,
    };
    this.live.set(record.sessionId, record);
    record.state = 'Ready';
    this.schedule(record);
    void a.sandbox.ended.then((end) => this.end(record, end.reason, end.message, end.recordedElsewhere));
    this.deps.metrics.liveSessions.inc({ backend: this.deps.backend.name });
    for (const exec of a.execs) {
      record.execs.recover(exec, {
        deps: this.deps,
        session: record,
        finished: (entry) => record.log.add(entry),
      });
    }
    return record;
  }

  /**
   * Makes this server serve a session it does not know yet, when its backend can find it (on
   * Kubernetes: by its Sandbox, made through another replica or before a restart), taking it over
   * for its owner. A session it knows is checked for an end elsewhere (deleted through another
   * replica): then it ends here too. An unknown one stays NOT_FOUND for the caller.
   * Every transport calls it before a request on a session (the async use cases call it themselves).
   */
  async serve(sessionId: string, principal: Principal): Promise<void> {
    const backend = this.deps.backend.sessions;
    const known = this.live.get(sessionId);
    if (known?.owner === principal.id && !known.ending) {
      const end = await known.sandbox?.endedElsewhere?.().catch(() => undefined);
      if (end) await this.end(known, end.reason, end.message, end.recordedElsewhere);
    }
    if (known || this.ended.has(sessionId) || !backend?.findSession) return;
    let finding = this.finding.get(sessionId);
    if (!finding) {
      finding = backend
        .findSession(sessionId, principal.id, principal.namespace)
        .then(
          (a) => void (this.live.has(a.sessionId) || this.takeIn(a, principal.name)),
          (e: unknown) => {
            if (toAppError(e).code !== 'NOT_FOUND') throw e;
          },
        )
        .finally(() => this.finding.delete(sessionId));
      this.finding.set(sessionId, finding);
    }
    await finding;
  }

  /** A session an earlier server left, found gone: its sandbox is removed; audited when remembered. */
  private lost(l: LostSession, journaled: JournaledSession | undefined): void {
    const { audit, backend, logger, metrics } = this.deps;
    logger.warn(
      { sessionId: l.sessionId, principal: l.principal, reason: l.reason, err: l.message },
      'a session left by an earlier server was gone; its sandbox is removed',
    );
    if (!journaled) return;
    const state = stateFor(l.reason);
    metrics.sessionsEnded.inc({ backend: backend.name, state, reason: l.reason });
    audit.record(
      buildSessionAudit({
        sessionId: journaled.sessionId,
        spec: journaled.spec,
        state,
        reason: l.reason,
        principal: journaled.principalName,
        backend: backend.name,
        time: new Date(),
      }),
    );
    this.journal.forget(journaled.sessionId);
  }

  /** Ends every live session (a stdio server exiting: nobody could reach them again). */
  async endAll(message: string): Promise<void> {
    await Promise.all([...this.live.values()].map((r) => this.end(r, 'Deleted', message)));
  }

  /** Live sessions now (for health). */
  get count(): number {
    return this.live.size;
  }

  /**
   * Ends a session once: kills its execs, removes its sandbox, then records how it ended. A
   * sandbox that ended by itself is removed the same way. An end another gateway process made and
   * recorded (`recordedElsewhere`: deleted through another replica) ends it here without a
   * second audit record or count.
   */
  private end(
    record: SessionRecord,
    reason: SessionReason,
    message: string,
    recordedElsewhere = false,
  ): Promise<void> {
    record.ending ??= (async () => {
      clearTimeout(record.timer);
      try {
        await record.sandbox?.close(reason);
      } catch (e) {
        this.deps.logger.warn(
          { sessionId: record.sessionId, err: toAppError(e).message },
          'session sandbox removal failed',
        );
      }
      await record.execs.settled();
      this.finish(record, reason, message, recordedElsewhere);
    })();
    return record.ending;
  }

  private finish(
    record: SessionRecord,
    reason: SessionReason,
    message: string,
    recordedElsewhere: boolean,
  ): void {
    const { backend, metrics, logger } = this.deps;
    const state = stateFor(reason);
    Object.assign(record, { state, reason, message, endedAt: Date.now() });
    if (this.live.delete(record.sessionId)) metrics.liveSessions.dec({ backend: backend.name });
    this.ended.set(record.sessionId, record);
    for (const old of this.ended.keys()) {
      if (this.ended.size <= ENDED_KEPT) break;
      this.ended.delete(old);
    }
    this.journal.forget(record.sessionId);
    if (!recordedElsewhere) {
      metrics.sessionsEnded.inc({ backend: backend.name, state, reason });
      this.audit(record, state, reason);
    }
    logger.info({ sessionId: record.sessionId, state, reason, message, recordedElsewhere }, 'session ended');
  }

  private audit(record: SessionRecord, state: SessionState, reason: SessionReason): void {
    this.deps.audit.record(
      buildSessionAudit({
        sessionId: record.sessionId,
        spec: record.spec,
        state,
        reason,
        principal: record.principalName,
        backend: this.deps.backend.name,
        time: new Date(record.endedAt ?? record.createdAt),
        usage: isSessionEnded(state)
          ? {
              durationMs: (record.endedAt ?? Date.now()) - record.createdAt,
              bytesIn: record.bytesIn,
              bytesOut: record.bytesOut,
            }
          : undefined,
      }),
    );
  }

  /** Every exec and file operation counts as activity. */
  private touch(record: SessionRecord): void {
    record.lastActivityAt = Date.now();
    this.schedule(record);
  }

  /**
   * One timer, at the nearer of the TTL and the idle deadline; an idle session with a running exec
   * is not idle. Where other replicas serve the session too (`endedElsewhere`), this replica's view
   * of its activity and lifetime may be stale (another one serves it, or extended it), so a
   * deadline passed here only asks the backend: its end, as its record says, or a look again.
   */
  private schedule(record: SessionRecord, notBeforeMs = 0): void {
    clearTimeout(record.timer);
    if (record.ending) return;
    const ttlAt = record.createdAt + record.spec.ttlSeconds * 1000;
    const idleAt = record.lastActivityAt + record.spec.idleTimeoutSeconds * 1000;
    const at = Math.min(ttlAt, idleAt);
    record.timer = setTimeout(
      () => {
        const now = Date.now();
        const endedElsewhere = record.sandbox?.endedElsewhere?.bind(record.sandbox);
        if (now >= idleAt && now < ttlAt && record.execs.running.length > 0) this.touch(record);
        else if (now < at) this.schedule(record);
        else if (endedElsewhere) void this.askForEnd(record, endedElsewhere);
        else if (now >= ttlAt)
          void this.end(record, 'TTLExpired', `its lifetime of ${record.spec.ttlSeconds} s is over`);
        else void this.end(record, 'IdleExpired', `nothing happened for ${record.spec.idleTimeoutSeconds} s`);
      },
      Math.min(Math.max(notBeforeMs, at - Date.now()), MAX_TIMER_MS),
    );
    record.timer.unref();
  }

  /**
   * A shared session past its deadline here: ends it as the backend's record says when that says
   * it ended, else looks again after the backend's `endCheckMs` (only overdue sessions are asked).
   */
  private async askForEnd(
    record: SessionRecord,
    endedElsewhere: () => Promise<SandboxEnd | undefined>,
  ): Promise<void> {
    const end = await endedElsewhere().catch((e: unknown) => {
      this.deps.logger.warn(
        { sessionId: record.sessionId, err: toAppError(e).message },
        'could not ask the backend whether an overdue session ended; asking again later',
      );
      return undefined;
    });
    if (end) await this.end(record, end.reason, end.message, end.recordedElsewhere);
    else this.schedule(record, this.backend.endCheckMs ?? DEFAULT_END_CHECK_MS);
  }

  private countedOut(record: SessionRecord, data: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
    return counted(data, (n) => {
      record.bytesOut += n;
      this.deps.metrics.fileBytes.inc({ direction: 'out' }, n);
    });
  }

  private view(record: SessionRecord, processes?: { pid: number; command: string }[]): Session {
    return sessionView(record, this.deps.backend.name, processes);
  }

  private sandboxOf(record: SessionRecord): SessionSandbox {
    if (!record.sandbox) throw new AppError('BUSY', `session ${record.sessionId} is still being created`);
    return record.sandbox;
  }

  private find(sessionId: string, principal: Principal): SessionRecord {
    const record = this.live.get(sessionId) ?? this.ended.get(sessionId);
    if (!record || record.owner !== principal.id) throw notFound(sessionId);
    return record;
  }

  /** A session that can still do something: an ended one is NOT_FOUND, saying how it ended. */
  private findLive(sessionId: string, principal: Principal): SessionRecord {
    const record = this.find(sessionId, principal);
    if (record.ending || isSessionEnded(record.state)) {
      throw new AppError('NOT_FOUND', `session ${sessionId} has ended (${record.state}: ${record.reason})`, {
        hint: 'create a new session',
      });
    }
    return record;
  }
}

/** What a list shows of a session another replica serves, as the backend's record of it says. */
function listedRecord(l: ListedSession): ViewedSession {
  return {
    sessionId: l.sessionId,
    spec: { ...l.spec, env: l.envNames.map((name) => ({ name })), secrets: [] },
    state: l.state,
    reason: l.reason,
    message: l.message,
    createdAt: l.createdAt,
    lastActivityAt: l.lastActivityAt,
    endedAt: l.endedAt,
    execs: { count: 0, running: [] },
  };
}

/** `data`, counting each chunk's bytes as it passes. */
async function* counted(data: AsyncIterable<Buffer>, count: (n: number) => void): AsyncIterable<Buffer> {
  for await (const chunk of data) {
    count(chunk.length);
    yield chunk;
  }
}
