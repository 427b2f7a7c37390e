/**
 * An in-memory session backend for unit tests of what the gateway decides (caps, ownership,
 * expiry, logs, audit, MCP shapes): files in a map, an exec answers its argv on stdout. The real
 * sandboxes are the docker tier's.
 */
import type { AuditRecord } from '../../src/api/audit.js';
import { classify } from '../../src/api/outcome.js';
import type { FileEntry, SessionReason } from '../../src/api/session.js';
import type {
  Adoption,
  ExecExecution,
  FinishedExec,
  ListedSession,
  SandboxEnd,
  SessionBackend,
  SessionSandbox,
} from '../../src/backends/sessions.js';
import type { SandboxBackend } from '../../src/backends/types.js';
import { SandpitService } from '../../src/gateway/service.js';
import type { SessionJournal } from '../../src/gateway/session-journal.js';
import type { SessionCaps } from '../../src/gateway/sessions.js';
import type { AuditTrail } from '../../src/observability/audit-trail.js';
import { silentLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { createPolicy, type PolicyOptions } from '../../src/policy/policy.js';
import type { EffectiveSessionSpec } from '../../src/policy/session.js';
import { AppError } from '../../src/shared/errors.js';

/** A sandbox that keeps files in a map and answers an exec with its argv on stdout. */
export class MemorySandbox implements SessionSandbox {
  readonly files = new Map<string, Buffer>();
  closedWith: SessionReason | undefined;
  ttl: number | undefined;
  /** What its runner's history holds: execs another gateway ran. */
  kept: FinishedExec[] = [];
  private endSandbox!: (end: SandboxEnd) => void;
  readonly ended = new Promise<SandboxEnd>((r) => (this.endSandbox = r));

  readonly sessionId: string;
  readonly served = 'cold';

  constructor(sessionId: string) {
    this.sessionId = sessionId;
  }

  /** The last tty size an exec was given or resized to. */
  terminal: { cols: number; rows: number } | undefined;

  exec(
    exec: Parameters<SessionSandbox['exec']>[0],
    options: Parameters<SessionSandbox['exec']>[1],
  ): ExecExecution {
    // The directory `link-out` stands for a symlink out of the workspace, `no-such-dir` for one
    // that does not exist, each refused as the runner does.
    const refusal =
      exec.cwd === 'link-out' ? LINK_OUT('cwd') : exec.cwd === 'no-such-dir' ? NO_DIR : undefined;
    if (refusal) {
      const result = Promise.reject(refusal);
      const none = () => undefined;
      return {
        execId: options.execId,
        result,
        writeStdin: () => Promise.resolve(),
        endStdin: none,
        resize: none,
        kill: none,
      };
    }
    // `cat` with streamed stdin echoes it until its end; any other argv answers itself.
    const cat = exec.argv[0] === 'cat' && options.streamStdin === true;
    const chunks: Buffer[] = cat ? [] : [Buffer.from(`${exec.argv.join(' ')}\n`)];
    let kill!: () => void;
    const killed = new Promise<void>((r) => (kill = r));
    let endStdin!: () => void;
    const stdinEnded = new Promise<void>((r) => (endStdin = r));
    const startedAt = Date.now();
    this.terminal = options.terminal;
    const run = exec.argv.includes('sleep')
      ? killed
      : cat
        ? Promise.race([stdinEnded, killed])
        : Promise.resolve();
    const result = run.then(() => {
      if (!cat) options.onOutput({ stream: 'stdout', data: chunks[0] ?? Buffer.alloc(0) });
      const text = Buffer.concat(chunks).toString();
      return {
        outcome: classify({ exitCode: 0, timedOut: false, oomKilled: false, cancelled: false }),
        stdout: { text, bytes: Buffer.byteLength(text), truncated: false, binary: false },
        stderr: { text: '', bytes: 0, truncated: false, binary: false },
        startedAt,
        finishedAt: Date.now(),
      };
    });
    options.signal?.addEventListener('abort', () => kill(), { once: true });
    return {
      execId: options.execId,
      result,
      writeStdin: (data) => {
        chunks.push(data);
        options.onOutput({ stream: 'stdout', data });
        return Promise.resolve();
      },
      endStdin,
      resize: (cols, rows) => (this.terminal = { cols, rows }),
      kill,
    };
  }

  private entry(path: string): FileEntry {
    const data = this.files.get(path);
    if (!data) throw new AppError('NOT_FOUND', `no file ${path}`);
    return { path, type: 'file', size: data.length, mode: '0644', mtime: new Date(0).toISOString() };
  }

  async writeFile(write: Parameters<SessionSandbox['writeFile']>[0]): Promise<FileEntry> {
    const chunks: Buffer[] = [];
    if (Buffer.isBuffer(write.data)) chunks.push(write.data);
    else for await (const c of write.data) chunks.push(c);
    this.files.set(write.path, Buffer.concat(chunks));
    return this.entry(write.path);
  }
  readFile(read: { path: string; maxBytes: number }) {
    const data = (this.files.get(read.path) ?? Buffer.alloc(0)).subarray(0, read.maxBytes);
    return Promise.resolve({ entry: this.entry(read.path), data: chunks([data]) });
  }
  list() {
    return Promise.resolve([...this.files.keys()].map((p) => this.entry(p)));
  }
  remove(remove: { path: string }) {
    this.files.delete(remove.path);
    return Promise.resolve();
  }
  mkdir(mkdir: { path: string }): Promise<FileEntry> {
    return Promise.resolve({
      path: mkdir.path,
      type: 'directory',
      size: 0,
      mode: '0755',
      mtime: new Date(0).toISOString(),
    });
  }
  watch() {
    return Promise.resolve(() => {});
  }
  processes() {
    return Promise.resolve([]);
  }
  history() {
    return Promise.resolve(this.kept);
  }
  artifacts(request: { path: string }): AsyncIterable<Buffer> {
    if (request.path === 'link-out') return refusedStream(LINK_OUT('path'));
    return chunks([Buffer.from('tar')]);
  }
  setTtl(ttlSeconds: number) {
    this.ttl = ttlSeconds;
    return Promise.resolve();
  }
  close(reason: SessionReason) {
    this.closedWith ??= reason;
    return Promise.resolve();
  }
  /** The container dies by itself. */
  die(end: SandboxEnd) {
    this.endSandbox(end);
  }
}

/**
 * The backend's record of sessions several replicas serve (as a Sandbox and its Lease are on
 * Kubernetes): who held each last, and the end the backend recorded, if any.
 */
export class MemoryCluster {
  readonly sessions = new Map<
    string,
    {
      principal: string;
      spec: EffectiveSessionSpec;
      createdAt: number;
      lastHolder: string;
      end: SandboxEnd | undefined;
      /** The replicas that asked whether it ended, one entry a question. */
      asked: string[];
    }
  >();

  /** The backend ends the session by itself (the operator's TTL or idle expiry). */
  endSession(sessionId: string, end: SandboxEnd): void {
    const s = this.sessions.get(sessionId);
    if (s) s.end = end;
  }
}

/** One replica's sandbox of a shared session: every operation holds it; its end is the cluster's. */
export class SharedMemorySandbox extends MemorySandbox {
  private readonly cluster: MemoryCluster;
  private readonly replica: string;

  constructor(sessionId: string, cluster: MemoryCluster, replica: string) {
    super(sessionId);
    this.cluster = cluster;
    this.replica = replica;
    this.record.lastHolder = replica;
  }
  override list() {
    this.record.lastHolder = this.replica;
    return super.list();
  }
  endedElsewhere(): Promise<SandboxEnd | undefined> {
    const r = this.record;
    r.asked.push(this.replica);
    return Promise.resolve(r.end && { ...r.end, recordedElsewhere: r.lastHolder !== this.replica });
  }
  private get record() {
    const r = this.cluster.sessions.get(this.sessionId);
    if (!r) throw new AppError('NOT_FOUND', `no session ${this.sessionId}`);
    return r;
  }
}

export function memorySessions(
  options: {
    caps?: Partial<SessionCaps>;
    policy?: PolicyOptions;
    sessions?: boolean;
    journal?: SessionJournal;
    /** What adoptSessions() finds. */
    adoption?: Adoption;
    /** What listSessions() finds (the backend lists none by itself when absent). */
    listed?: (principal: string) => ListedSession[];
    /** Sessions other replicas serve too: this replica's name and the backend's shared record. */
    replicaOf?: { cluster: MemoryCluster; replica: string; endCheckMs: number };
  } = {},
) {
  const sandboxes: MemorySandbox[] = [];
  const shared = options.replicaOf;
  const sandboxFor = (sessionId: string) =>
    shared
      ? new SharedMemorySandbox(sessionId, shared.cluster, shared.replica)
      : new MemorySandbox(sessionId);
  const sessions: SessionBackend = {
    ...(shared ? { endCheckMs: shared.endCheckMs } : {}),
    async createSession(spec, { sessionId, principal, createdAt }) {
      shared?.cluster.sessions.set(sessionId, {
        principal,
        spec,
        createdAt: createdAt ?? Date.now(),
        lastHolder: shared.replica,
        end: undefined,
        asked: [],
      });
      const s = sandboxFor(sessionId);
      sandboxes.push(s);
      await new Promise((r) => setImmediate(r));
      return s;
    },
    ...(shared
      ? {
          findSession(sessionId: string, principal: string) {
            const r = shared.cluster.sessions.get(sessionId);
            if (!r || r.principal !== principal || r.end)
              return Promise.reject(new AppError('NOT_FOUND', `no session ${sessionId}`));
            const sandbox = sandboxFor(sessionId);
            sandboxes.push(sandbox);
            return Promise.resolve({
              sessionId,
              principal,
              spec: r.spec,
              createdAt: r.createdAt,
              sandbox,
              execs: [],
            });
          },
        }
      : {}),
    adoptSessions: () => Promise.resolve(options.adoption ?? { adopted: [], lost: [] }),
    ...(options.listed ? { listSessions: (p: string) => Promise.resolve(options.listed!(p)) } : {}),
  };
  const backend: SandboxBackend = {
    name: 'docker',
    start: () => {
      throw new Error('no runs here');
    },
    health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'test' }),
    close: () => Promise.resolve(),
    ...(options.sessions === false ? {} : { sessions }),
  };
  const records: AuditRecord[] = [];
  const audit: AuditTrail = {
    assertAvailable() {},
    record: (r: AuditRecord) => void records.push(r),
    open: async () => {},
    flush: async () => {},
    written: async () => {},
    close: async () => {},
    file: undefined,
  };
  const metrics = createMetrics();
  const service = new SandpitService({
    backend,
    policy: createPolicy(options.policy),
    logger: silentLogger(),
    metrics,
    audit,
    slots: { maxConcurrent: 4, maxQueued: 0 },
    sessions: options.caps,
    journal: options.journal,
  });
  return { service, sandboxes, records, metrics };
}

/** What the runner answers for a path through `link-out`, which stands for a symlink out of the workspace. */
const LINK_OUT = (field: string): AppError =>
  new AppError(
    'INVALID_REQUEST',
    `${field}: link-out is a symlink that leads out of the workspace (to /etc)`,
    {
      violations: [{ field, message: 'link-out is a symlink that leads out of the workspace (to /etc)' }],
    },
  );

/** What the runner answers for a cwd that does not exist. */
const NO_DIR = new AppError('NOT_FOUND', 'cwd: no-such-dir: No such file or directory', {
  violations: [{ field: 'cwd', message: 'no-such-dir: No such file or directory' }],
});

/** A stream that fails before its first chunk, as the runner's refusal of a request does. */
function refusedStream(err: AppError): AsyncIterable<Buffer> {
  return { [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(err) }) };
}

/** An async iterable over the given chunks. */
async function* chunks(list: Buffer[]): AsyncIterable<Buffer> {
  await Promise.resolve();
  yield* list;
}
