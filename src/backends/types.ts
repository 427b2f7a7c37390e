/**
 * The interface both backends implement (DESIGN.md §6). A backend runs an already-evaluated spec:
 * policy is decided before a backend ever sees a request.
 */
import type { RunResult } from '../api/run.js';
import type { EffectiveSpec } from '../policy/evaluate.js';
import type { OutputChunk } from '../runner/capture.js';
import type { SessionBackend } from './sessions.js';

export interface StartOptions {
  runId: string;
  /** Aborting ends the run as Cancelled and removes its sandbox. */
  signal?: AbortSignal;
  /** Who asked for the run (the Kubernetes backend records it on the SandboxRun). */
  principal?: string;
  /** The owner's principal id: the Kubernetes backend records it, so that any gateway process can check ownership. */
  owner?: string | undefined;
  /** The tenant's namespace (Kubernetes: where its SandboxRun is made); the backend's own when absent. */
  namespace?: string | undefined;
  /**
   * Set when the run is asked for under an idempotency key: the digest of its request. A backend
   * that records runs (`runs`) records it, and when a run of this id is already recorded, follows
   * that run instead of starting one (if its owner and digest match; else the result rejects with
   * CONFLICT).
   */
  requestDigest?: string | undefined;
  /** The run backs an MCP task: a backend that records runs lists it among its owner's tasks. */
  task?: boolean | undefined;
}

export interface RunExecution {
  runId: string;
  /** Live output (the head of each stream, as it is written). Ends when the run ends. */
  output: AsyncIterable<OutputChunk>;
  /** The final result, with capped output. Resolves for every program outcome; rejects only on infrastructure errors. */
  result: Promise<RunResult>;
  /**
   * Resolves once the sandbox is gone (removal may finish after `result`), or once the backend
   * stops watching for that (its wait timed out, or the backend was closed).
   */
  cleanedUp: Promise<void>;
  /**
   * Where the backend records runs for every process (`runs`): resolves once the run is recorded
   * there (Kubernetes: its SandboxRun exists), or once it ended without being recorded. Never rejects.
   */
  recorded?: Promise<void>;
  /**
   * True once the backend found this run already recorded (a repeat of its idempotency key, e.g.
   * through another replica) and followed it rather than starting it.
   */
  adopted?: () => boolean;
  /**
   * Where the run's record outlives this process (`runs`; Kubernetes: the SandboxRun): stops
   * following the run WITHOUT stopping it (nothing is cancelled). Its watches and log stream close,
   * and `result` rejects with ENGINE_UNAVAILABLE unless the run had ended already; the run goes on,
   * and any gateway process answers for it from its record. Absent where a run cannot outlive the
   * process that follows it (Docker: the gateway owns its containers).
   */
  release?: () => void;
}

export interface BackendHealth {
  ok: boolean;
  backend: string;
  detail: string;
  /** Sandbox images that are present, and missing ones. */
  images?: { present: string[]; missing: string[] };
  runtimes?: string[];
  /** Warm pools, when the backend keeps them. */
  pools?: { template: string; idle: number; starting: number }[];
}

/** Whose run it is: the owner's principal id, and the tenant namespace (Kubernetes) its runs are in. */
export interface RunOwner {
  id: string;
  namespace?: string | undefined;
}

/**
 * Runs as the backend records them, readable by every gateway process (Kubernetes: the SandboxRun
 * object). A run that `owner` may not see is answered exactly like one that does not exist.
 */
export interface RunRecords {
  /** The run's current state, or undefined. */
  get(runId: string, owner: RunOwner): Promise<RunResult | undefined>;
  /**
   * Asks the run to stop and waits, within a bound, until it has ended (the process that follows
   * it sees it end Cancelled); a finished run is returned as it is. Undefined when there is none.
   */
  cancel(runId: string, owner: RunOwner): Promise<RunResult | undefined>;
  /** The owner's runs that back MCP tasks (StartOptions.task), the newest first, at most `max`. */
  tasks(owner: RunOwner, max: number): Promise<RecordedTask[]>;
}

export interface RecordedTask {
  runId: string;
  /** When the run was made (ms since the epoch). */
  createdAt: number;
}

/**
 * The output files runs returned (issue 18), readable for as long as the gateway keeps the run's
 * record. A file of a run that `owner` may not see is answered like one that does not exist.
 */
export interface RunFiles {
  /** A file the run returned, by its workspace path; NOT_FOUND when there is none (or it is gone). */
  read(runId: string, path: string, owner: RunOwner): Promise<Buffer>;
  /** The gateway no longer keeps the run's record: its files may go. */
  release(runId: string): void;
}

export interface SandboxBackend {
  readonly name: 'docker' | 'kubernetes' | 'oci';
  start(spec: EffectiveSpec, options: StartOptions): RunExecution;
  /**
   * Where runs are recorded beyond the process that started them. Absent (Docker): only that
   * process knows a run, from its memory.
   */
  readonly runs?: RunRecords | undefined;
  /** Long-lived sessions, where the backend serves them. */
  readonly sessions?: SessionBackend | undefined;
  /** The files runs returned (outputs), where the backend keeps them. */
  readonly files?: RunFiles | undefined;
  health(): Promise<BackendHealth>;
  /** Stops accepting runs, waits for running sandboxes to be removed. */
  close(): Promise<void>;
}
