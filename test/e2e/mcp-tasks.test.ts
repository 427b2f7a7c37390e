/**
 * Long runs as MCP tasks through the built CLI's `serve` on Docker, with the SDK's own client
 * (`client.experimental.tasks`), stateful and stateless: a 20 s run made as a task is polled while
 * it works, its result fetched once it ends; another is cancelled (its container goes); neither is
 * cancelled by its client going away; another token finds neither; get_run still answers for a
 * client without tasks, and a plain call of the same tool still streams its output.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  McpError,
  type CallToolResult,
  type Task,
} from '@modelcontextprotocol/sdk/types.js';
import type Docker from 'dockerode';
import { requireDocker } from '../support/docker.js';
import {
  callTool,
  connectHttp,
  containersOfRun,
  ensureBuilt,
  startServe,
  waitRunsGone,
  type Served,
} from './helpers.js';
import { outputStreamsBeforeResult } from './scenarios.js';

const ALICE = 'alice-token-0123456789';
const BOB = 'bob-token-0123456789';
const CONFIG = {
  auth: {
    tokens: [
      { name: 'alice', token: ALICE },
      { name: 'bob', token: BOB },
    ],
  },
};
/** A run of 20 s that says how far it got. */
const TWENTY_SECONDS = {
  language: 'bash',
  code: 'for i in $(seq 20); do echo tick $i; sleep 1; done',
  timeoutSeconds: 30,
};

/** Makes `args` a task of run_code as docs/mcp.md shows it: the first message of the stream is the task. */
async function startTask(client: Client, args: Record<string, unknown>): Promise<Task> {
  const stream = client.experimental.tasks.callToolStream(
    { name: 'run_code', arguments: args },
    CallToolResultSchema,
    {
      task: { ttl: 600_000 },
    },
  );
  for await (const message of stream) {
    if (message.type === 'taskCreated') return message.task;
    if (message.type === 'error') throw message.error;
    assert.fail(`expected the task first, got ${message.type}`);
  }
  return assert.fail('the stream ended without a task');
}

const structured = (r: CallToolResult) =>
  r.structuredContent as { runId: string; phase: string; stdout: string; durationMs: number };
const notFound = (e: unknown): boolean => e instanceof McpError && /not found/i.test(e.message);

for (const mode of ['stateful', 'stateless'] as const) {
  describe(`MCP tasks (serve ${mode}, Docker)`, () => {
    let docker: Docker;
    let served: Served;
    let mcpUrl: string;

    before(async () => {
      docker = await requireDocker();
      ensureBuilt();
      served = await startServe(CONFIG, mode === 'stateless' ? ['--stateless'] : []);
      mcpUrl = `${served.url}/mcp`;
    });
    after(async () => {
      if (served) assert.equal(await served.stop(), 0, served.logs.join('\n'));
    });

    test('a 20 s run as a task: polled while it works, cancelled, its result fetched; a disconnect cancels neither', async () => {
      const alice = await connectHttp(mcpUrl, ALICE);
      const kept = await startTask(alice.client, TWENTY_SECONDS);
      const stopped = await startTask(alice.client, TWENTY_SECONDS);
      assert.match(kept.taskId, /^run-[0-9a-f]{12}$/, 'the task id is the run id');
      assert.equal(kept.status, 'working');
      // The client that made them goes away (in stateful mode its MCP session ends too).
      await alice.close();

      const again = await connectHttp(mcpUrl, ALICE);
      const tasks = again.client.experimental.tasks;
      const polls: Task[] = [];
      for (let i = 0; i < 3; i++) {
        polls.push(await tasks.getTask(kept.taskId));
        await new Promise((r) => setTimeout(r, kept.pollInterval ?? 1000));
      }
      assert.deepEqual(
        polls.map((t) => t.status),
        ['working', 'working', 'working'],
      );
      assert.equal((await containersOfRun(docker, kept.taskId)).length, 1, 'its container runs');
      const listed = (await tasks.listTasks()).tasks.map((t) => t.taskId);
      assert.ok(listed.includes(kept.taskId) && listed.includes(stopped.taskId), JSON.stringify(listed));

      const bob = await connectHttp(mcpUrl, BOB);
      await assert.rejects(bob.client.experimental.tasks.getTask(kept.taskId), notFound);
      await assert.rejects(bob.client.experimental.tasks.cancelTask(stopped.taskId), notFound);
      assert.deepEqual((await bob.client.experimental.tasks.listTasks()).tasks, []);
      await bob.close();

      const cancelled = await tasks.cancelTask(stopped.taskId);
      assert.equal(cancelled.status, 'cancelled');
      await waitRunsGone(docker, [stopped.taskId]);
      const cancelledResult = await tasks.getTaskResult(stopped.taskId, CallToolResultSchema);
      assert.equal(structured(cancelledResult).phase, 'Cancelled');

      // tasks/result waits for the end of the run, then answers what a plain call would have.
      const result = await tasks.getTaskResult(kept.taskId, CallToolResultSchema, { timeout: 60_000 });
      const out = structured(result);
      assert.equal(out.runId, kept.taskId);
      assert.equal(out.phase, 'Succeeded');
      assert.match(out.stdout, /tick 1\n[\s\S]*tick 20\n$/);
      assert.ok(out.durationMs >= 19_000, `it ran its 20 s (${out.durationMs} ms)`);
      const done = await tasks.getTask(kept.taskId);
      assert.equal(done.status, 'completed');
      assert.equal(done.statusMessage, 'Succeeded, exit code 0');

      // A client without tasks reads the same run with get_run.
      const viaGetRun = await callTool(again.client, 'get_run', { runId: kept.taskId });
      assert.equal(structured(viaGetRun).phase, 'Succeeded');
      await again.close();
    });

    test('callToolStream follows a task to its result', async () => {
      const c = await connectHttp(mcpUrl, ALICE);
      const seen: string[] = [];
      let result: CallToolResult | undefined;
      const stream = c.client.experimental.tasks.callToolStream(
        { name: 'run_command', arguments: { command: ['sh', '-c', 'sleep 2; echo via-task'] } },
        CallToolResultSchema,
        { task: {} },
      );
      for await (const message of stream) {
        seen.push(message.type === 'taskStatus' ? `status:${message.task.status}` : message.type);
        if (message.type === 'result') result = message.result;
        if (message.type === 'error') throw message.error;
      }
      assert.equal(seen[0], 'taskCreated');
      assert.ok(seen.includes('status:working'), seen.join(' '));
      assert.equal(seen.at(-1), 'result');
      assert.equal(structured(result!).stdout, 'via-task\n');
      await c.close();
    });

    test('sandbox_exec as a task: an exec in its session, by <session>:<exec>; cancel kills it', async () => {
      const c = await connectHttp(mcpUrl, ALICE);
      const tasks = c.client.experimental.tasks;
      const created = await callTool(c.client, 'sandbox_create', { language: 'bash' });
      const sessionId = (created.structuredContent as { id: string }).id;
      const execTask = async (shell: string): Promise<Task> => {
        const stream = tasks.callToolStream(
          { name: 'sandbox_exec', arguments: { sessionId, shell } },
          CallToolResultSchema,
          { task: {} },
        );
        for await (const m of stream) if (m.type === 'taskCreated') return m.task;
        return assert.fail('no task');
      };
      const done = await execTask('sleep 2; echo from-exec');
      const killed = await execTask('sleep 60');
      assert.match(done.taskId, new RegExp(`^${sessionId}:exec-[0-9a-f]{12}$`));
      assert.equal((await tasks.getTask(killed.taskId)).status, 'working');
      assert.equal((await tasks.cancelTask(killed.taskId)).status, 'cancelled');
      const result = await tasks.getTaskResult(done.taskId, CallToolResultSchema);
      const out = result.structuredContent as {
        execId: string;
        sessionId: string;
        stdout: string;
        phase: string;
      };
      assert.deepEqual(
        [out.sessionId, `${sessionId}:${out.execId}`, out.stdout, out.phase],
        [sessionId, done.taskId, 'from-exec\n', 'Succeeded'],
      );
      const bob = await connectHttp(mcpUrl, BOB);
      await assert.rejects(bob.client.experimental.tasks.getTask(done.taskId), notFound);
      await bob.close();
      await callTool(c.client, 'sandbox_delete', { sessionId });
      await c.close();
    });

    test('a plain call of a tool that offers tasks still streams its output, then the result', async () => {
      const c = await connectHttp(mcpUrl, ALICE);
      await outputStreamsBeforeResult(c.client);
      await c.close();
    });
  });
}
