/**
 * The session port of a backend (DESIGN.md §6, "Sessions on Docker"): one hardened, long-lived
 * sandbox per session whose runner serves framed requests (execs, file operations) on its stdin
 * and answers in-band. Policy is decided before a backend sees a request: it gets evaluated specs
 * and workspace-relative paths only, and confines them again itself (the runner resolves paths one
 * component at a time, refusing symlinks that leave the workspace).
 */
import type { CapturedStream } from '../api/result.js';
import type { Outcome } from '../api/outcome.js';
import type { FileEntry, SessionReason, SessionState } from '../api/session.js';
import type { EffectiveExec, EffectiveSessionSpec, SessionFacts } from '../policy/session.js';
import type { OutputChunk } from '../runner/capture.js';

export interface SessionOptions {
  sessionId: string;
  /** Who owns the session (recorded with the sandbox, so a restarted gateway knows). */
  principal: string;
  /** The tenant's namespace (Kubernetes: where its Sandbox is made); the backend's own when absent. */
  namespace?: string | undefined;
  /** When the gateway made its record (ms), kept with the sandbox for whoever lists it; now when absent. */
  createdAt?: number | undefined;
  signal?: AbortSignal | undefined;
}

export interface SessionBackend {
  /** The shortest idle timeout this backend can enforce (policy refuses less); none when absent. */
  readonly minIdleTimeoutSeconds?: number | undefined;
  /**
   * Where other replicas serve sessions too (a sandbox's `endedElsewhere`): how long after a
   * deadline passed in one replica's view it asks again whether the session ended (the backend's
   * own expiry may lag the deadline by about this much).
   */
  readonly endCheckMs?: number | undefined;
  /** Makes and starts the session's sandbox; resolves once its runner answered. */
  createSession(spec: EffectiveSessionSpec, options: SessionOptions): Promise<SessionSandbox>;
  /**
   * The live session sandboxes this instance made before it restarted, re-attached (Docker: by
   * the instance id on their labels). Sandboxes whose runner no longer answers, or that ended
   * while no gateway was there, are removed and reported as lost (to be audited).
   */
  adoptSessions(): Promise<Adoption>;
  /**
   * A live session this process does not hold, found by name and taken over for `principal`
   * (Kubernetes: by its Sandbox, when another replica made it); NOT_FOUND when there is none or it
   * is another principal's. Absent on backends whose sessions belong to one process.
   */
  findSession?(sessionId: string, principal: string, namespace?: string): Promise<AdoptedSession>;
  /**
   * Every session of `principal` the backend still has a record of, live or ended, read without
   * attaching to any (Kubernetes: its Sandboxes in the tenant's namespace). Absent on backends
   * whose sessions belong to one process.
   */
  listSessions?(principal: string, namespace?: string): Promise<ListedSession[]>;
}

/** A session as its record outside any gateway says (a Sandbox object): what a list shows of it. */
export interface ListedSession {
  sessionId: string;
  /** As created (no variable's value), and the names of its variables (a secret's name may be left out). */
  spec: SessionFacts;
  envNames: string[];
  state: SessionState;
  reason: SessionReason;
  message: string | undefined;
  createdAt: number;
  lastActivityAt: number;
  endedAt: number | undefined;
}

/** A finished exec as the session's runner kept it (its history), for a gateway that did not run it. */
export interface FinishedExec {
  execId: string;
  argv: string[];
  background: boolean;
  timeoutSeconds: number;
  outcome: ExecOutcome;
}

export interface Adoption {
  adopted: AdoptedSession[];
  lost: LostSession[];
}

export interface AdoptedSession {
  sessionId: string;
  principal: string;
  /** As the session was created, with the TTL it has now (a PATCH may have extended it). */
  spec: EffectiveSessionSpec;
  createdAt: number;
  sandbox: SessionSandbox;
  /**
   * Execs the runner still runs, or finished while no gateway was attached (their reports kept
   * until taken): each result resolves from the runner's buffer, with the tail of its output.
   */
  execs: RecoveredExec[];
}

export interface RecoveredExec extends ExecExecution {
  argv: string[];
  background: boolean;
  startedAt: number;
}

/** A session sandbox found ended, or whose runner no longer answered: removed. */
export interface LostSession {
  /** Undefined when nothing on the sandbox names it (a pool container's never does before a claim). */
  sessionId: string | undefined;
  principal: string | undefined;
  reason: SessionReason;
  message: string;
}

/** How a sandbox ended by itself (not by close()). */
export interface SandboxEnd {
  reason: SessionReason;
  message: string;
  /** Another gateway process ended it and recorded the end (audited, counted): this one does not again. */
  recordedElsewhere?: boolean;
}

export interface ExecOptions {
  execId: string;
  /** Each piece of output as it is written (the head of each stream). */
  onOutput: (chunk: OutputChunk) => void;
  /** Aborting kills the exec (its process group). */
  signal?: AbortSignal | undefined;
  /**
   * Keep stdin open after the request's `stdin` for writeStdin() until endStdin() (a WebSocket).
   * Otherwise the program reads the request's stdin, then end of file, as a run does.
   */
  streamStdin?: boolean | undefined;
  /** A tty exec's window size at the start (default 80×24); resize() changes it later. */
  terminal?: { cols: number; rows: number } | undefined;
}

export interface ExecOutcome {
  outcome: Outcome;
  stdout: CapturedStream;
  stderr: CapturedStream;
  startedAt: number;
  finishedAt: number;
}

export interface ExecExecution {
  execId: string;
  /** Resolves for every outcome of the command; rejects only when the sandbox failed. */
  result: Promise<ExecOutcome>;
  /** Streamed stdin (an exec whose request carried none). */
  writeStdin(data: Buffer): Promise<void>;
  endStdin(): void;
  /** A tty exec's window size. */
  resize(cols: number, rows: number): void;
  kill(): void;
}

export interface FileWrite {
  path: string;
  data: Buffer | AsyncIterable<Buffer>;
  /** Permission bits for a new file (default 0644). */
  mode?: number | undefined;
  /** Write at this offset of an existing file instead of replacing it. */
  offset?: number | undefined;
  append?: boolean | undefined;
}

export interface FileRead {
  entry: FileEntry;
  /** The bytes, at most the read's maxBytes (the caller checked the size against its cap). */
  data: AsyncIterable<Buffer>;
}

export type FileChange = { path: string; kind: 'changed' | 'removed' };

export interface SessionSandbox {
  readonly sessionId: string;
  /** How it was made: claimed from a session pool (warm), or started for this session (cold). */
  readonly served: 'warm' | 'cold';
  exec(exec: EffectiveExec, options: ExecOptions): ExecExecution;
  writeFile(write: FileWrite): Promise<FileEntry>;
  readFile(read: { path: string; maxBytes: number }): Promise<FileRead>;
  list(list: { path: string; recursive: boolean }): Promise<FileEntry[]>;
  remove(remove: { path: string; recursive: boolean }): Promise<void>;
  mkdir(mkdir: { path: string }): Promise<FileEntry>;
  /**
   * One path ('' : the whole workspace) as a tar stream of its files and directories; TOO_LARGE
   * (field path) before any byte when they hold more than maxBytes.
   */
  artifacts(artifacts: { path: string; maxBytes: number }): AsyncIterable<Buffer>;
  /** Calls `onChange` when a file under `path` changes; the returned function stops it. */
  watch(path: string, onChange: (change: FileChange) => void): Promise<() => void>;
  /**
   * The execs that finished in this sandbox and whose reports a gateway took, oldest first, as its
   * runner keeps them (HISTORY_BYTES in all, the newest always; exact up to RETAINED_OUTPUT_BYTES
   * of output per stream, the last bytes of a longer one). Empty from a runner that keeps none.
   */
  history(): Promise<FinishedExec[]>;
  /**
   * Processes that outlived their exec (setsid, double fork), alive until the session ends.
   * Undefined where asking would count as the session's activity (Kubernetes: this replica does
   * not hold the session, and taking it renews its Lease): reading a session's state never keeps
   * it from idling.
   */
  processes(): Promise<{ pid: number; command: string }[] | undefined>;
  /** A new whole lifetime, counted from creation (PATCH); the runner enforces it from now on. */
  setTtl(ttlSeconds: number): Promise<void>;
  /**
   * Where other gateway replicas serve it too: whether it ended while this one did not hold it
   * (then it is done here as well). Undefined while it lives.
   */
  endedElsewhere?(): Promise<SandboxEnd | undefined>;
  /** Resolves when the sandbox ends by itself (runner gone, container died, its TTL inside). */
  readonly ended: Promise<SandboxEnd>;
  /** Kills every exec and removes the sandbox; resolves once it is gone. Idempotent. */
  close(reason: SessionReason): Promise<void>;
}
