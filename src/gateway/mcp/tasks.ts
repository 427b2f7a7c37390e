/**
 * MCP tasks (protocol 2025-11-25; experimental in SDK 1.x) backed by the records sandpit already
 * keeps, never by a store of their own. A task of run_code or run_command is its run (task id = run
 * id: the gateway's run store on Docker, the SandboxRun on Kubernetes, where another replica or a
 * restarted gateway answers too); a task of sandbox_exec is an exec in its session (task id
 * `<sessionId>:<execId>`, for as long as the session's exec log keeps it).
 *
 * The SDK hands a task store only the MCP session id, which a restarted gateway or another
 * replica never shares; so each server's store is bound to its principal and answers by it: another
 * principal's task is not found, as its run is.
 */
import type { CreateTaskOptions, TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { ErrorCode, McpError, type CallToolResult, type Task } from '@modelcontextprotocol/sdk/types.js';
import type { Phase, RunResult } from '../../api/run.js';
import type { ExecResult } from '../../api/session.js';
import { AppError } from '../../shared/errors.js';
import type { Principal } from '../principal.js';
import type { ToolDeps } from './context.js';
import { renderRun } from './render.js';
import { toolResult } from './results.js';
import { runToolResult } from './run.js';
import { ExecResultOutput } from './session-schemas.js';

/** How often a client should ask for a task's status (and how often tasks/result looks). */
export const TASK_POLL_MS = 1000;
/** tasks/list answers at most this many a page. */
export const TASK_PAGE = 50;

type TaskRef = { kind: 'run'; runId: string } | { kind: 'exec'; sessionId: string; execId: string };

/** The task id of an exec: run ids never hold a colon, so the two kinds cannot meet. */
export const execTaskId = (sessionId: string, execId: string): string => `${sessionId}:${execId}`;

export function parseTaskId(taskId: string): TaskRef {
  const colon = taskId.indexOf(':');
  if (colon < 0) return { kind: 'run', runId: taskId };
  return { kind: 'exec', sessionId: taskId.slice(0, colon), execId: taskId.slice(colon + 1) };
}

/**
 * A run's phase as a task's status. A program that failed or timed out still gave a result (as a
 * plain call's is not an error), so its task is `completed` and tasks/result returns it; only a
 * cancel makes a task `cancelled`.
 */
export function taskStatus(phase: Phase): Task['status'] {
  if (phase === 'Pending' || phase === 'Running') return 'working';
  return phase === 'Cancelled' ? 'cancelled' : 'completed';
}

/** A run or an exec, as the task it backs. Pure but for `now`, the update time of a live one. */
export function taskOf(taskId: string, r: RunResult | ExecResult, now = new Date()): Task {
  const createdAt = r.createdAt ?? now.toISOString();
  const outcome = [r.phase, r.reason && r.reason !== 'Completed' ? `(${r.reason})` : undefined]
    .filter(Boolean)
    .join(' ');
  return {
    taskId,
    status: taskStatus(r.phase),
    statusMessage: r.exitCode === null ? outcome : `${outcome}, exit code ${r.exitCode}`,
    createdAt,
    lastUpdatedAt: r.finishedAt ?? now.toISOString(),
    // Kept as long as the record is (docs/mcp.md, "Tasks"), not for a fixed time.
    ttl: null,
    pollInterval: TASK_POLL_MS,
  };
}

/** The tasks this gateway process created, by owner, for tasks/list (the newest `max`). */
export class TaskIndex {
  private readonly owners = new Map<string, { owner: string; createdAt: number }>();
  private readonly max: number;

  constructor(max = 1000) {
    this.max = max;
  }

  add(owner: string, taskId: string, createdAt = Date.now()): void {
    this.owners.delete(taskId);
    this.owners.set(taskId, { owner, createdAt });
    for (const oldest of this.owners.keys()) {
      if (this.owners.size <= this.max) break;
      this.owners.delete(oldest);
    }
  }

  /** The owner's tasks, the newest first. */
  of(owner: string): { taskId: string; createdAt: number }[] {
    return [...this.owners]
      .filter(([, o]) => o.owner === owner)
      .map(([taskId, o]) => ({ taskId, createdAt: o.createdAt }))
      .reverse();
  }

  /** How many tasks it keeps at most (per process). */
  get capacity(): number {
    return this.max;
  }
}

/** What binds a server's tasks: whose they are, and the process's index of them. */
export interface TaskBinding {
  principal: Principal;
  index: TaskIndex;
}

const notFound = (taskId: string): McpError =>
  new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);

/** The SDK's TaskStore over runs and execs, for one principal. */
export class PrincipalTaskStore implements TaskStore {
  private readonly deps: ToolDeps;
  private readonly binding: TaskBinding;

  constructor(deps: ToolDeps, binding: TaskBinding) {
    this.deps = deps;
    this.binding = binding;
  }

  /** A task tools/call just started: listed from now on, and as it is now. */
  async created(taskId: string): Promise<Task> {
    this.binding.index.add(this.binding.principal.id, taskId);
    return (await this.getTask(taskId)) ?? Promise.reject(notFound(taskId));
  }

  /** Tasks start in tools/call (tool-call.ts), which names them by their run or exec. */
  createTask(_params: CreateTaskOptions): Promise<Task> {
    return Promise.reject(new McpError(ErrorCode.InvalidRequest, 'tasks are created by tools/call'));
  }

  async getTask(taskId: string): Promise<Task | null> {
    const record = await this.read(taskId);
    return record ? taskOf(taskId, record) : null;
  }

  /** The result a plain call would have returned, from the record as it is kept now. */
  async getTaskResult(taskId: string): Promise<CallToolResult> {
    const record = await this.read(taskId);
    if (!record) throw notFound(taskId);
    if ('runId' in record) return runToolResult(this.deps, record, this.binding.principal);
    return toolResult(ExecResultOutput, record, renderRun(record));
  }

  /** The run's record holds the result: there is nothing to store. */
  storeTaskResult(taskId: string): Promise<void> {
    return Promise.reject(new McpError(ErrorCode.InvalidRequest, `task ${taskId} keeps its own result`));
  }

  /** Only a cancel is asked of a store (tasks/cancel): it cancels the run, or kills the exec. */
  async updateTaskStatus(taskId: string, status: Task['status']): Promise<void> {
    if (status !== 'cancelled') {
      throw new McpError(
        ErrorCode.InvalidRequest,
        `a task's status follows its run; it cannot be set to ${status}`,
      );
    }
    await this.record(taskId, 'cancel');
  }

  /**
   * The principal's tasks, the newest first: this process's, and where the backend records runs
   * (Kubernetes) the run tasks any gateway process made, so that another replica or a restarted
   * gateway lists them too.
   */
  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const start = cursor === undefined ? 0 : Number(cursor);
    if (!Number.isSafeInteger(start) || start < 0) throw new McpError(ErrorCode.InvalidParams, 'bad cursor');
    const { principal, index } = this.binding;
    const recorded = await this.answer(() => this.deps.service.runs.recordedTasks(principal, index.capacity));
    const ids = newestFirst([
      ...index.of(principal.id),
      ...(recorded ?? []).map((r) => ({ taskId: r.runId, createdAt: r.createdAt })),
    ]);
    const page = ids.slice(start, start + TASK_PAGE);
    const tasks = (await Promise.all(page.map((id) => this.getTask(id)))).filter(
      (t): t is Task => t !== null,
    );
    const next = start + TASK_PAGE;
    return next < ids.length ? { tasks, nextCursor: String(next) } : { tasks };
  }

  private read(taskId: string): Promise<RunResult | ExecResult | undefined> {
    return this.record(taskId, 'get');
  }

  /** The task's run or exec, read or cancelled (killed) as this store's principal; undefined when it has none. */
  private record(taskId: string, op: 'get' | 'cancel'): Promise<RunResult | ExecResult | undefined> {
    const ref = parseTaskId(taskId);
    const { principal } = this.binding;
    const { runs, sessions } = this.deps.service;
    return this.answer<RunResult | ExecResult>(() => {
      if (ref.kind === 'run') return runs[op](ref.runId, principal);
      return op === 'get'
        ? sessions.execResult(ref.sessionId, ref.execId, principal)
        : sessions.killExec(ref.sessionId, ref.execId, principal);
    });
  }

  /** NOT_FOUND is "no such task" (another principal's included); other errors say what failed. */
  private async answer<T>(fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof AppError && e.code === 'NOT_FOUND') return undefined;
      if (e instanceof AppError)
        throw new McpError(ErrorCode.InternalError, `${e.code}: ${e.message}`, e.toJSON());
      throw e;
    }
  }
}

/** Task ids, each once, the newest first. */
function newestFirst(tasks: { taskId: string; createdAt: number }[]): string[] {
  const seen = new Map<string, number>();
  for (const t of tasks) seen.set(t.taskId, Math.max(seen.get(t.taskId) ?? 0, t.createdAt));
  return [...seen].sort((a, b) => b[1] - a[1]).map(([id]) => id);
}
