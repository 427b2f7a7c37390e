// End to end in Kubernetes mode: the built CLI's `sandpit serve` with sandbox.backend: kubernetes
// (the gateway identity's kubeconfig, bound to deploy/gateway-rbac.yaml) answers MCP over
// Streamable HTTP; a real operator process runs the pods. Output arrives as notifications while
// the program runs; a client's cancellation cancels the SandboxRun and its pod goes.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  callTool,
  connectHttp,
  ensureBuilt,
  recordNotifications,
  textOf,
  waitFor,
  type Connected,
  type Served,
} from '../e2e/helpers.js';
import {
  failureMarkingTest,
  getRun,
  startSuite,
  stopSuite,
  type Suite,
} from '../integration/kubernetes/operator-harness.js';
import { withCluster } from '../support/kube/index.js';
import { outputStreamsBeforeResult } from '../e2e/scenarios.js';
import { bindGatewayRbac, serveKubernetesGateway } from './kube-gateway.js';
import { CONTRACT_SANDBOX_CONFIG } from './target.js';

let suite: Suite;
let served: Served;
let conn: Connected;
let failed = false;

function structured(result: CallToolResult): Record<string, unknown> {
  assert.ok(!result.isError, `tool failed: ${textOf(result)}`);
  assert.ok(result.structuredContent);
  return result.structuredContent;
}

describe('sandpit serve with sandbox.backend: kubernetes (built CLI, MCP over Streamable HTTP)', () => {
  before(async () => {
    ensureBuilt();
    suite = await startSuite(await withCluster(), 'mcp-kubernetes', { sandbox: CONTRACT_SANDBOX_CONFIG });
    await bindGatewayRbac(suite.cluster, suite.ns);
    served = await serveKubernetesGateway(suite);
    conn = await connectHttp(`${served.url}/mcp`);
  });
  after(async () => {
    await conn?.close();
    const code = await served?.stop();
    if (code !== 0) failed = true;
    if (failed && served) for (const l of served.logs) process.stderr.write(`# serve: ${l}\n`);
    await stopSuite(suite, failed, (l) => process.stderr.write(`# ${l}\n`));
    assert.equal(code, 0, 'serve exits cleanly on SIGTERM');
  });
  const it = failureMarkingTest(180_000, () => (failed = true));

  it('sandbox_health: ok, kubernetes, the operator leading', async () => {
    const h = structured(await callTool(conn.client, 'sandbox_health'));
    assert.equal(h.ok, true, String(h.detail));
    assert.equal(h.backend, 'kubernetes');
    assert.match(String(h.detail), new RegExp(`operator ${suite.operator.identity} leads`));
  });

  // Live output starts once the kubelet reports the container running (one to three seconds after it
  // started on this loaded 2-core cluster): the gap between the lines is longer than that.
  it('run_code: output streamed as notifications while the program runs, before the result', async () => {
    const out = await outputStreamsBeforeResult(conn.client, {
      sleepSeconds: 4,
      minGapMs: 1000,
      timeoutMs: 120_000,
    });
    assert.equal(out.backend, 'kubernetes');
  });

  it('run_code: the result is the operator’s, and the SandboxRun is there for kubectl', async () => {
    const r = structured(
      await callTool(conn.client, 'run_code', {
        language: 'python',
        code: 'import sys\nprint("to stdout")\nsys.exit(7)',
      }),
    );
    assert.equal(r.phase, 'Failed');
    assert.equal(r.reason, 'Error');
    assert.equal(r.exitCode, 7);
    assert.equal(r.stdout, 'to stdout\n');
    assert.equal(r.backend, 'kubernetes');
    const run = await getRun(suite.cluster, suite.ns, String(r.runId));
    assert.equal(run?.status?.phase, 'Failed');
    assert.equal(run?.status?.exitCode, 7);
    assert.equal(run?.metadata?.annotations?.['sandpit.dev/principal'], 'local');
  });

  it('a client’s cancellation cancels the SandboxRun; its pod goes; get_run says Cancelled', async () => {
    const { notices } = recordNotifications(conn.client);
    const abort = new AbortController();
    const call = conn.client.callTool(
      { name: 'run_code', arguments: { code: "import time\nprint('started', flush=True)\ntime.sleep(60)" } },
      undefined,
      { signal: abort.signal, timeout: 120_000 },
    );
    const rejected = assert.rejects(call);
    const runId = await waitFor(
      'the run to print',
      () => {
        const started = notices.find((n) => n.logger === 'sandpit')?.data as { runId?: string } | undefined;
        return started?.runId && notices.some((n) => String(n.data).includes('started'))
          ? started.runId
          : undefined;
      },
      60_000,
    );
    abort.abort();
    await rejected;
    const record = await waitFor(
      'get_run to report Cancelled',
      async () => {
        const r = structured(await callTool(conn.client, 'get_run', { runId }));
        return r.phase === 'Cancelled' ? r : undefined;
      },
      60_000,
    );
    assert.equal(record.reason, 'Cancelled');
    const run = await getRun(suite.cluster, suite.ns, runId);
    assert.equal(run?.spec.cancel, true);
    assert.equal(run?.status?.phase, 'Cancelled');
    await waitFor(
      'the pod to be deleted',
      async () =>
        (
          await suite.cluster.core.listNamespacedPod({
            namespace: suite.ns,
            labelSelector: `sandpit.dev/run=${runId}`,
          })
        ).items.length === 0
          ? true
          : undefined,
      60_000,
    );
  });
});
