/**
 * MCP tasks over the SDK's own client and server linked in memory, with a stand-in backend whose
 * runs stay live until cancelled: which tools offer tasks, the task store bound to its principal
 * (another principal's task is not found, in get, result, cancel and list), the status a run's
 * phase maps to, a run recorded elsewhere (another replica, a restarted gateway) answered as a
 * task, a task's run left running by a shutdown where the backend records runs, and a task's
 * creation refused as a JSON-RPC error.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { PHASES, type RunResult } from '../../../src/api/run.js';
import { buildResult } from '../../../src/api/result.js';
import type { RunExecution, RunRecords, SandboxBackend } from '../../../src/backends/types.js';
import { createMcpServer } from '../../../src/gateway/mcp/server.js';
import {
  execTaskId,
  parseTaskId,
  taskOf,
  taskStatus,
  TaskIndex,
  TASK_POLL_MS,
} from '../../../src/gateway/mcp/tasks.js';
import type { Principal } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { cancelledResult } from '../../support/cancelled-result.js';
import { liveRunsBackend } from '../../support/live-runs-backend.js';

const alice: Principal = { id: 'token:aaaaaaaaaaaaaaaa', name: 'alice', scope: {} };
const bob: Principal = { id: 'token:bbbbbbbbbbbbbbbb', name: 'bob', scope: {} };

/** Runs nothing: each run stays live until its signal aborts, then ends Cancelled. */
const backend: SandboxBackend = {
  name: 'docker',
  start(spec, { runId, signal }): RunExecution {
    const result = new Promise<RunResult>((resolve) =>
      signal?.addEventListener('abort', () => resolve(cancelledResult(spec, runId, 'docker'))),
    );
    return { runId, output: (async function* () {})(), result, cleanedUp: result.then(() => undefined) };
  },
  health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'test' }),
  close: () => Promise.resolve(),
};

function serviceWith(runs?: RunRecords, base: SandboxBackend = backend): SandpitService {
  return new SandpitService({
    backend: runs ? { ...base, runs } : base,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 4, maxQueued: 0 },
  });
}

/** A client of a server bound to `principal`, as the HTTP transports make one per session. */
async function clientOf(service: SandpitService, principal: Principal, index: TaskIndex): Promise<Client> {
  const deps = {
    service,
    logger: silentLogger(),
    metrics: createMetrics(),
    defaultPrincipal: principal,
    version: '0',
  };
  const server = createMcpServer(deps, undefined, { principal, index });
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'unit', version: '1' });
  await Promise.all([server.connect(b), client.connect(a)]);
  return client;
}

/** Creates a task as the SDK's client does for a tool whose taskSupport is optional. */
async function createTask(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args, task: {} } },
    CreateTaskResultSchema,
  );
  return created.task.taskId;
}

const notFound = (e: unknown): boolean => e instanceof McpError && /not found/i.test(e.message);

describe('the task store', () => {
  test('run_code, run_command and sandbox_exec offer tasks (optional); no other tool does', async () => {
    const client = await clientOf(serviceWith(), alice, new TaskIndex());
    const { tools } = await client.listTools();
    const offering = tools.filter((t) => t.execution?.taskSupport === 'optional').map((t) => t.name);
    assert.deepEqual(offering.sort(), ['run_code', 'run_command', 'sandbox_exec']);
    assert.ok(tools.every((t) => t.execution === undefined || offering.includes(t.name)));
    assert.deepEqual(client.getServerCapabilities()?.tasks, {
      list: {},
      cancel: {},
      requests: { tools: { call: {} } },
    });
    await client.close();
  });

  test('a task is its run, by id; it answers its principal only, and cancels the run', async () => {
    const service = serviceWith();
    const index = new TaskIndex();
    const a = await clientOf(service, alice, index);
    const b = await clientOf(service, bob, index);
    const taskId = await createTask(a, 'run_code', { code: 'print(1)' });
    assert.match(taskId, /^run-[0-9a-f]{12}$/);
    assert.equal((await service.runs.get(taskId, alice)).phase, 'Running');

    const task = await a.experimental.tasks.getTask(taskId);
    assert.equal(task.status, 'working');
    assert.equal(task.statusMessage, 'Running');
    assert.equal(task.pollInterval, TASK_POLL_MS);
    assert.deepEqual(
      (await a.experimental.tasks.listTasks()).tasks.map((t) => t.taskId),
      [taskId],
    );

    await assert.rejects(b.experimental.tasks.getTask(taskId), notFound);
    await assert.rejects(b.experimental.tasks.getTaskResult(taskId, CallToolResultSchema), notFound);
    await assert.rejects(b.experimental.tasks.cancelTask(taskId), notFound);
    assert.deepEqual((await b.experimental.tasks.listTasks()).tasks, []);
    assert.equal((await service.runs.get(taskId, alice)).phase, 'Running', 'bob cancelled nothing');

    const cancelled = await a.experimental.tasks.cancelTask(taskId);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal((await service.runs.get(taskId, alice)).phase, 'Cancelled');
    const result: CallToolResult = await a.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    assert.equal(result.isError, undefined);
    assert.equal((result.structuredContent as { runId: string; phase: string }).runId, taskId);
    assert.equal((result.structuredContent as { phase: string }).phase, 'Cancelled');
    await assert.rejects(a.experimental.tasks.cancelTask(taskId), /terminal status: cancelled/);
    await Promise.all([a.close(), b.close()]);
  });

  test('a run recorded elsewhere (another replica, a restarted gateway) is its owner’s task here', async () => {
    const subject = serviceWith().runs.plan({ template: 'python', code: 'print(1)' }, alice);
    const recorded = buildResult({
      runId: 'r-0123456789abcdef',
      subject,
      outcome: { phase: 'Succeeded', exitCode: 0 },
      stdout: { text: 'done\n', bytes: 5, truncated: false, binary: false },
      startedAt: 0,
      finishedAt: 1000,
      backend: 'kubernetes',
    });
    const asked: string[] = [];
    const service = serviceWith({
      get: (runId, owner) => {
        asked.push(`${runId} ${owner.id}`);
        return Promise.resolve(runId === recorded.runId && owner.id === alice.id ? recorded : undefined);
      },
      cancel: () => Promise.resolve(undefined),
      tasks: (owner) =>
        Promise.resolve(owner.id === alice.id ? [{ runId: recorded.runId, createdAt: 1000 }] : []),
    });
    const fresh = new TaskIndex();
    const a = await clientOf(service, alice, fresh);
    const b = await clientOf(service, bob, fresh);
    const task = await a.experimental.tasks.getTask(recorded.runId);
    assert.equal(task.status, 'completed');
    assert.equal(task.statusMessage, 'Succeeded, exit code 0');
    const result: CallToolResult = await a.experimental.tasks.getTaskResult(
      recorded.runId,
      CallToolResultSchema,
    );
    assert.equal((result.structuredContent as { stdout: string }).stdout, 'done\n');
    assert.deepEqual(
      (await a.experimental.tasks.listTasks()).tasks.map((t) => t.taskId),
      [recorded.runId],
      'tasks/list has it, though this process never made it',
    );
    assert.deepEqual((await b.experimental.tasks.listTasks()).tasks, []);
    await assert.rejects(b.experimental.tasks.getTask(recorded.runId), notFound);
    assert.ok(asked.includes(`${recorded.runId} ${bob.id}`), 'asked as bob, and answered not found');
    await Promise.all([a.close(), b.close()]);
  });

  test('a shutdown leaves a task’s run running where the backend records runs, and cancels a plain call’s', async () => {
    const { backend: recording, started } = liveRunsBackend(true);
    const service = serviceWith(undefined, recording);
    const client = await clientOf(service, alice, new TaskIndex());
    const plain = client.callTool({ name: 'run_code', arguments: { code: 'print(1)' } });
    const taskId = await createTask(client, 'run_code', { code: 'print(2)' });
    while (started.size < 2) await new Promise((r) => setTimeout(r, 5));
    await service.shutdown();
    assert.equal(started.get(taskId)?.released, true);
    assert.equal(started.get(taskId)?.signal.aborted, false);
    const result = (await plain) as CallToolResult;
    assert.equal((result.structuredContent as { phase: string }).phase, 'Cancelled');
    const plainRun = [...started.keys()].find((id) => id !== taskId);
    assert.equal(plainRun && started.get(plainRun)?.released, false);
    await client.close();
  });

  test('a refused task is a JSON-RPC error with the AppError; a tool without tasks is method-not-found', async () => {
    const client = await clientOf(serviceWith(), alice, new TaskIndex());
    await assert.rejects(
      createTask(client, 'run_code', { code: 'x', timeoutSeconds: 9999 }),
      (e: unknown) => {
        assert.ok(e instanceof McpError);
        assert.equal(e.code, -32602);
        assert.match(e.message, /INVALID_REQUEST|POLICY_DENIED/);
        assert.match(e.message, /timeoutSeconds/);
        return true;
      },
    );
    await assert.rejects(createTask(client, 'get_run', { runId: 'run-x' }), (e: unknown) => {
      assert.ok(e instanceof McpError);
      assert.equal(e.code, -32601);
      return true;
    });
    assert.deepEqual((await client.experimental.tasks.listTasks()).tasks, []);
    await client.close();
  });
});

describe('the mapping', () => {
  test('a live phase is working, cancelled is cancelled, every other end is completed', () => {
    const expected: Record<string, string> = {
      Pending: 'working',
      Running: 'working',
      Succeeded: 'completed',
      Failed: 'completed',
      TimedOut: 'completed',
      Rejected: 'completed',
      Cancelled: 'cancelled',
    };
    for (const phase of PHASES) assert.equal(taskStatus(phase), expected[phase], phase);
  });

  test('a task carries its run’s times and outcome', () => {
    const subject = serviceWith().runs.plan({ template: 'python', code: 'x' }, alice);
    const failed = buildResult({
      runId: 'run-000000000001',
      subject,
      outcome: { phase: 'Failed', reason: 'Error', exitCode: 3 },
      startedAt: Date.parse('2026-01-01T00:00:00Z'),
      finishedAt: Date.parse('2026-01-01T00:00:05Z'),
      backend: 'docker',
    });
    assert.deepEqual(taskOf(failed.runId, failed), {
      taskId: 'run-000000000001',
      status: 'completed',
      statusMessage: 'Failed (Error), exit code 3',
      createdAt: failed.createdAt,
      lastUpdatedAt: failed.finishedAt,
      ttl: null,
      pollInterval: TASK_POLL_MS,
    });
  });

  test('an exec’s task id names its session and exec; a run’s is the run id', () => {
    const id = execTaskId('ses-0011223344556677', 'exec-aabbccddeeff');
    assert.deepEqual(parseTaskId(id), {
      kind: 'exec',
      sessionId: 'ses-0011223344556677',
      execId: 'exec-aabbccddeeff',
    });
    assert.deepEqual(parseTaskId('run-aabbccddeeff'), { kind: 'run', runId: 'run-aabbccddeeff' });
  });

  test('the index lists an owner’s tasks, the newest first, and keeps the newest `max`', () => {
    const index = new TaskIndex(3);
    for (const [owner, id] of [
      ['a', '1'],
      ['b', '2'],
      ['a', '3'],
      ['a', '4'],
    ] as const)
      index.add(owner, id, Number(id));
    const ids = (owner: string) => index.of(owner).map((t) => t.taskId);
    assert.deepEqual(ids('a'), ['4', '3']);
    assert.deepEqual(ids('b'), ['2']);
    assert.deepEqual(index.of('b'), [{ taskId: '2', createdAt: 2 }]);
    index.add('b', '5');
    assert.deepEqual(ids('b'), ['5']);
  });
});
