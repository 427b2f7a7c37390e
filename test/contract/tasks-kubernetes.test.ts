// MCP tasks in Kubernetes mode survive their gateway: the built CLI's `sandpit serve` (the gateway
// identity, a real operator running the pods) makes two 20 s runs as tasks through the SDK's own
// client; that gateway is killed (a crash) or stopped with SIGTERM (a rollout: it lets the tasks'
// runs go on, unfollowed, and cancels only the plain call it was streaming); a second one, a new
// process with new MCP sessions, answers the same tasks from their SandboxRuns: polls one, cancels
// the other (spec.cancel), and returns the first one's result once it ends.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, type Task } from '@modelcontextprotocol/sdk/types.js';
import { connectHttp, ensureBuilt, waitFor, type Served } from '../e2e/helpers.js';
import {
  customApi,
  failureMarkingTest,
  getRun,
  startSuite,
  stopSuite,
  type Suite,
} from '../integration/kubernetes/operator-harness.js';
import type { SandboxRun } from '../../src/api/v1alpha1/sandboxrun.js';
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

/** A plain call's run: streamed to its caller, and cancelled by a gateway's shutdown. */
const PLAIN = { language: 'bash', code: 'echo plain; sleep 25', timeoutSeconds: 30 };

/** How the first gateway ends: killed, or stopped gracefully; and the exit code that gives. */
const ENDINGS = [
  { signal: 'SIGKILL', code: null, how: 'is killed (a crash)' },
  { signal: 'SIGTERM', code: 0, how: 'stops on SIGTERM (a rollout)' },
] as const;

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
    await Promise.all(gateways.map((g) => g.stop()));
    if (failed) for (const g of gateways) for (const l of g.logs) process.stderr.write(`# serve: ${l}\n`);
    await stopSuite(suite, failed, (l) => process.stderr.write(`# ${l}\n`));
  });
  const it = failureMarkingTest(300_000, () => (failed = true));

  /** The SandboxRun of the plain call in flight (its code is PLAIN's). */
  const plainRun = (): Promise<SandboxRun> =>
    waitFor('the plain call’s SandboxRun', async () => {
      const list = (await customApi(suite.cluster).listNamespacedCustomObject({
        group: 'sandpit.dev',
        version: 'v1alpha1',
        plural: 'sandboxruns',
        namespace: suite.ns,
      })) as { items: SandboxRun[] };
      return list.items.find((r) => r.spec.code === PLAIN.code);
    });

  for (const ending of ENDINGS) {
    it(`tasks made on one gateway that ${ending.how} are polled, cancelled and their result fetched on the next`, async () => {
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

      // The gateway ends between create and result. A crash leaves every run going; a graceful stop
      // lets the tasks' runs go on (their SandboxRuns answer for them) and cancels the plain call's.
      if (ending.signal === 'SIGKILL') {
        process.kill(first.pid, 'SIGKILL');
        assert.equal(await first.stop(), null, 'killed by the signal');
      } else {
        const call = a.client.callTool({ name: 'run_code', arguments: PLAIN }).catch(() => undefined);
        const plain = await plainRun();
        assert.equal(await first.stop(), 0, 'a graceful stop on SIGTERM exits 0');
        // The call's answer never comes (the gateway closed its stream): closing the client ends it.
        await a.client.close().catch(() => undefined);
        await call;
        const cancelled = await getRun(suite.cluster, suite.ns, plain.metadata.name);
        assert.equal(cancelled?.spec.cancel, true, 'the plain call’s run is cancelled');
        for (const task of [kept, stopped]) {
          const run = await getRun(suite.cluster, suite.ns, task.taskId);
          assert.equal(run?.spec.cancel, undefined, `task ${task.taskId} is not cancelled`);
        }
      }
      await a.client.close().catch(() => undefined);

      const second = await serve();
      const b = await connectHttp(`${second.url}/mcp`);
      const tasks = b.client.experimental.tasks;
      const polled = await tasks.getTask(kept.taskId);
      assert.ok(['working', 'completed'].includes(polled.status), polled.status);
      const listed = (await tasks.listTasks()).tasks.map((t) => t.taskId);
      assert.deepEqual(
        listed.filter((id) => id === kept.taskId || id === stopped.taskId).sort(),
        [kept.taskId, stopped.taskId].sort(),
        `the next gateway lists the tasks the first made: ${listed.join(', ')}`,
      );

      assert.equal((await tasks.getTask(stopped.taskId)).status, 'working');
      const cancelled = await tasks.cancelTask(stopped.taskId);
      assert.equal(cancelled.status, 'cancelled');
      const stoppedRun = await getRun(suite.cluster, suite.ns, stopped.taskId);
      assert.equal(stoppedRun?.spec.cancel, true);
      assert.equal(stoppedRun?.status?.phase, 'Cancelled');

      const result = await tasks.getTaskResult(kept.taskId, CallToolResultSchema, { timeout: 180_000 });
      const out = result.structuredContent as {
        runId: string;
        phase: string;
        stdout: string;
        backend: string;
      };
      assert.equal(out.runId, kept.taskId);
      assert.equal(out.phase, 'Succeeded');
      assert.equal(out.backend, 'kubernetes');
      assert.match(out.stdout, /tick 20\n$/);
      const done = await waitFor('the task to say completed', async () => {
        const t = await tasks.getTask(kept.taskId);
        return t.status === 'completed' ? t : undefined;
      });
      assert.equal(done.statusMessage, 'Succeeded, exit code 0');
      assert.equal((await getRun(suite.cluster, suite.ns, kept.taskId))?.spec.cancel, undefined);
      await b.close();
      assert.equal(await second.stop(), 0, 'the second gateway exits cleanly on SIGTERM');
    });
  }
});
