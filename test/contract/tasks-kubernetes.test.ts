// MCP tasks in Kubernetes mode survive their gateway: the built CLI's `sandpit serve` (the gateway
// identity, a real operator running the pods) makes two 20 s runs as tasks through the SDK's own
// client; that gateway is killed; a second one, a new process with new MCP sessions, answers the
// same tasks from their SandboxRuns: polls one, cancels the other (spec.cancel), and returns the
// first one's result once it ends.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, type Task } from '@modelcontextprotocol/sdk/types.js';
import { connectHttp, ensureBuilt, waitFor, type Served } from '../e2e/helpers.js';
import {
  failureMarkingTest,
  getRun,
  startSuite,
  stopSuite,
  type Suite,
} from '../integration/kubernetes/operator-harness.js';
import { withCluster } from '../support/kube/index.js';
import { bindGatewayRbac, serveKubernetesGateway } from './kube-gateway.js';
import { CONTRACT_SANDBOX_CONFIG } from './target.js';

let suite: Suite;
const gateways: Served[] = [];
let failed = false;

const TWENTY_SECONDS = {
  language: 'bash',
  code: 'for i in $(seq 20); do echo tick $i; sleep 1; done',
  timeoutSeconds: 30,
};

async function startTask(client: Client): Promise<Task> {
  const stream = client.experimental.tasks.callToolStream(
    { name: 'run_code', arguments: TWENTY_SECONDS },
    CallToolResultSchema,
    { task: { ttl: 600_000 } },
  );
  for await (const message of stream) {
    if (message.type === 'taskCreated') return message.task;
    if (message.type === 'error') throw message.error;
  }
  return assert.fail('no task');
}

describe('MCP tasks on Kubernetes survive a gateway restart (built CLI, Streamable HTTP)', () => {
  const serve = async (): Promise<Served> => {
    const served = await serveKubernetesGateway(suite);
    gateways.push(served);
    return served;
  };

  before(async () => {
    ensureBuilt();
    suite = await startSuite(await withCluster(), 'tasks-kubernetes', { sandbox: CONTRACT_SANDBOX_CONFIG });
    await bindGatewayRbac(suite.cluster, suite.ns);
  });
  after(async () => {
    const codes = await Promise.all(gateways.map((g) => g.stop()));
    if (failed) for (const g of gateways) for (const l of g.logs) process.stderr.write(`# serve: ${l}\n`);
    await stopSuite(suite, failed, (l) => process.stderr.write(`# ${l}\n`));
    assert.equal(codes.at(-1), 0, 'the second gateway exits cleanly on SIGTERM');
  });
  const it = failureMarkingTest(300_000, () => (failed = true));

  it('tasks made on one gateway are polled, cancelled and their result fetched on the next', async () => {
    const first = await serve();
    const a = await connectHttp(`${first.url}/mcp`);
    const kept = await startTask(a.client);
    const stopped = await startTask(a.client);
    assert.equal(
      (await getRun(suite.cluster, suite.ns, kept.taskId))?.metadata?.name,
      kept.taskId,
      'task id = SandboxRun name',
    );
    assert.equal((await a.client.experimental.tasks.getTask(kept.taskId)).status, 'working');

    // The gateway dies between create and result (a crash; a graceful SIGTERM cancels the runs it follows).
    process.kill(first.pid, 'SIGKILL');
    assert.equal(await first.stop(), null, 'killed by the signal');
    await a.client.close().catch(() => undefined);

    const second = await serve();
    const b = await connectHttp(`${second.url}/mcp`);
    const tasks = b.client.experimental.tasks;
    const polled = await tasks.getTask(kept.taskId);
    assert.ok(['working', 'completed'].includes(polled.status), polled.status);

    assert.equal((await tasks.getTask(stopped.taskId)).status, 'working');
    const cancelled = await tasks.cancelTask(stopped.taskId);
    assert.equal(cancelled.status, 'cancelled');
    const stoppedRun = await getRun(suite.cluster, suite.ns, stopped.taskId);
    assert.equal(stoppedRun?.spec.cancel, true);
    assert.equal(stoppedRun?.status?.phase, 'Cancelled');

    const result = await tasks.getTaskResult(kept.taskId, CallToolResultSchema, { timeout: 180_000 });
    const out = result.structuredContent as { runId: string; phase: string; stdout: string; backend: string };
    assert.equal(out.runId, kept.taskId);
    assert.equal(out.phase, 'Succeeded');
    assert.equal(out.backend, 'kubernetes');
    assert.match(out.stdout, /tick 20\n$/);
    const done = await waitFor('the task to say completed', async () => {
      const t = await tasks.getTask(kept.taskId);
      return t.status === 'completed' ? t : undefined;
    });
    assert.equal(done.statusMessage, 'Succeeded, exit code 0');
    await b.close();
  });
});
