/**
 * What every transport must do, written once and run over stdio, stateful HTTP and stateless HTTP:
 * every tool's happy path, output streamed before the result, cancellation, policy denials.
 */
import assert from 'node:assert/strict';
import type Docker from 'dockerode';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { TOOL_NAMES } from '../../src/gateway/mcp/tools/index.js';
import {
  callTool,
  containerExists,
  containerRunning,
  recordNotifications,
  textOf,
  waitFor,
} from './helpers.js';

type Structured = Record<string, unknown>;

function structured(result: CallToolResult): Structured {
  assert.ok(!result.isError, `tool failed: ${textOf(result)}`);
  assert.ok(result.structuredContent, 'structuredContent is missing');
  assert.ok(textOf(result).length > 0, 'the readable text part is missing');
  return result.structuredContent;
}

export async function everyToolWorks(client: Client): Promise<void> {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());

  const hello = structured(await callTool(client, 'run_code', { language: 'python', code: 'print(6 * 7)' }));
  assert.equal(hello.phase, 'Succeeded');
  assert.equal(hello.exitCode, 0);
  assert.equal(hello.stdout, '42\n');
  assert.equal(hello.truncated, false);

  const inputs = structured(
    await callTool(client, 'run_code', {
      code: "import os, sys\nprint(open('data/in.txt').read().strip(), sys.stdin.read().strip(), os.environ['GREETING'])",
      files: [{ path: 'data/in.txt', content: 'from-a-file' }],
      stdin: 'from-stdin\n',
      env: [{ name: 'GREETING', value: 'from-env' }],
      timeoutSeconds: 20,
      resources: { memory: '256m' },
    }),
  );
  assert.equal(inputs.stdout, 'from-a-file from-stdin from-env\n');

  const node = structured(
    await callTool(client, 'run_code', {
      language: 'node',
      code: 'console.log([1,2,3].map((x) => x * 2).join(","))',
    }),
  );
  assert.equal(node.stdout, '2,4,6\n');

  const cmd = structured(
    await callTool(client, 'run_command', { command: ['sh', '-c', 'echo out; echo err >&2; exit 3'] }),
  );
  assert.equal(cmd.phase, 'Failed');
  assert.equal(cmd.reason, 'Error');
  assert.equal(cmd.exitCode, 3);
  assert.equal(cmd.stdout, 'out\n');
  assert.equal(cmd.stderr, 'err\n');

  const got = structured(await callTool(client, 'get_run', { runId: hello.runId }));
  assert.equal(got.runId, hello.runId);
  assert.equal(got.stdout, '42\n');

  const cancelledAfterEnd = structured(await callTool(client, 'cancel_run', { runId: hello.runId }));
  assert.equal(cancelledAfterEnd.phase, 'Succeeded', 'cancelling a finished run leaves it as it was');

  const templates = structured(await callTool(client, 'list_templates')).templates as {
    name: string;
    defaults: { timeoutSeconds: number };
  }[];
  assert.deepEqual(templates.map((t) => t.name).sort(), [
    'bash',
    'c',
    'node',
    'python',
    'python-data',
    'rust',
  ]);

  const health = structured(await callTool(client, 'sandbox_health'));
  assert.equal(health.ok, true, String(health.detail));
  assert.equal(health.backend, 'docker');

  const py = structured(await callTool(client, 'execute_python_code', { code_string: 'print("seed")' }));
  assert.equal(py.success, true);
  assert.equal(py.stdout, 'seed\n');
  assert.equal(py.exit_code, 0);
  assert.equal(py.timed_out, false);
  assert.equal(py.error, null);

  const failing = structured(
    await callTool(client, 'execute_python_code', { code_string: 'raise ValueError("boom")' }),
  );
  assert.equal(failing.success, false);
  assert.equal(failing.exit_code, 1);
  assert.match(String(failing.stderr), /ValueError: boom/);

  const seedHealth = structured(await callTool(client, 'check_sandbox_health'));
  assert.equal(seedHealth.status, 'healthy');
  assert.equal(seedHealth.engine_available, true);
  assert.deepEqual(seedHealth.missing_images, []);
}

/**
 * print, sleep, print: both lines arrive as notifications at least `minGapMs` apart, and before the
 * result. Returns the structured result.
 */
export async function outputStreamsBeforeResult(
  client: Client,
  { sleepSeconds = 1, minGapMs = 700, timeoutMs = 60_000 } = {},
): Promise<Record<string, unknown>> {
  const { notices, mark } = recordNotifications(client);
  const progress: string[] = [];
  const result = (await client.callTool(
    {
      name: 'run_code',
      arguments: {
        code: `import time\nprint('first', flush=True)\ntime.sleep(${sleepSeconds})\nprint('second', flush=True)`,
      },
    },
    undefined,
    { timeout: timeoutMs, onprogress: (p) => void progress.push(p.message ?? '') },
  )) as CallToolResult;
  const resultSeq = mark();
  const resultAt = performance.now();
  const out = structured(result);
  assert.equal(out.stdout, 'first\nsecond\n', 'the final result still carries the output');

  const started = notices.find((n) => n.logger === 'sandpit');
  assert.deepEqual(started?.data, { event: 'run_started', runId: out.runId });
  const first = notices.find((n) => n.logger === 'stdout' && String(n.data).includes('first'));
  const second = notices.find((n) => n.logger === 'stdout' && String(n.data).includes('second'));
  assert.ok(first && second, `stdout notifications missing: ${JSON.stringify(notices)}`);
  assert.ok(first.seq < second.seq && second.seq < resultSeq, 'notifications arrive before the result');
  assert.ok(
    second.at - first.at >= minGapMs,
    `the lines were streamed, not batched (${Math.round(second.at - first.at)} ms apart)`,
  );
  assert.ok(resultAt >= second.at);
  // Only the first: the SDK client drops a progress notification that lands in the same read as
  // the response (it deletes the progress handler before the queued notification runs). The log
  // notifications above prove the second line was sent before the result.
  assert.ok(
    progress.some((p) => p.includes('first')),
    `progress: ${JSON.stringify(progress)}`,
  );
  return out;
}

/** A client's cancellation aborts the run, removes its container, and get_run then says Cancelled. */
export async function clientCancellationStopsTheRun(
  client: Client,
  docker: Docker,
  serverPid: number,
): Promise<void> {
  const { notices } = recordNotifications(client);
  const abort = new AbortController();
  const marker = `client-cancel-${Date.now()}`;
  const call = client.callTool(
    {
      name: 'run_code',
      arguments: {
        code: `import subprocess\nprint('started', flush=True)\nsubprocess.run(['sh', '-c', 'sleep 60; : "$0"', '${marker}'])`,
      },
    },
    undefined,
    { signal: abort.signal, timeout: 120_000 },
  );
  const rejected = assert.rejects(call);
  const runId = await waitFor('the run to print', () => {
    const started = notices.find((n) => n.logger === 'sandpit')?.data as { runId?: string } | undefined;
    return started?.runId && notices.some((n) => n.logger === 'stdout') ? started.runId : undefined;
  });
  const container = await waitFor('the container running the program', () =>
    containerRunning(docker, serverPid, marker),
  );
  const t0 = performance.now();
  abort.abort();
  await rejected;
  const record = await waitFor('get_run to report Cancelled', async () => {
    const r = structured(await callTool(client, 'get_run', { runId }));
    return r.phase === 'Cancelled' ? r : undefined;
  });
  assert.equal(record.reason, 'Cancelled');
  await waitFor('its container to be removed', async () =>
    (await containerExists(docker, container)) ? undefined : true,
  );
  assert.ok(performance.now() - t0 < 20_000, 'cancellation did not wait for the 60 s program');
}

/** cancel_run on a live run: the run ends Cancelled, its container is removed, get_run still answers. */
export async function cancelRunTool(client: Client, docker: Docker, serverPid: number): Promise<void> {
  const { notices } = recordNotifications(client);
  const marker = `cancel-run-${Date.now()}`;
  const call = callTool(client, 'run_command', {
    command: ['sh', '-c', 'echo up; sleep 60; : "$0"', marker],
  });
  const runId = await waitFor('the run to start', () => {
    const started = notices.find((n) => n.logger === 'sandpit')?.data as { runId?: string } | undefined;
    return started?.runId && notices.some((n) => n.logger === 'stdout') ? started.runId : undefined;
  });
  const container = await waitFor('the container running the program', () =>
    containerRunning(docker, serverPid, marker),
  );
  const cancelled = structured(await callTool(client, 'cancel_run', { runId }));
  assert.equal(cancelled.phase, 'Cancelled');
  const original = structured(await call);
  assert.equal(original.phase, 'Cancelled', 'the caller of the run gets the Cancelled result');
  assert.equal(structured(await callTool(client, 'get_run', { runId })).phase, 'Cancelled');
  await waitFor('its container to be removed', async () =>
    (await containerExists(docker, container)) ? undefined : true,
  );
}

/** A request over a policy limit is refused with isError naming the field and the limit, and a hint. */
export async function policyDenialNamesTheField(client: Client): Promise<void> {
  const denied = await callTool(client, 'run_code', { code: 'print(1)', timeoutSeconds: 9999 });
  assert.equal(denied.isError, true);
  const text = textOf(denied);
  assert.match(text, /^POLICY_DENIED/);
  assert.match(text, /timeoutSeconds: 9999s is over the ceiling of 30s \(limit: 30s\)/);
  assert.match(text, /hint: /);
  const error = denied._meta?.['sandpit.dev/error'] as {
    code: string;
    violations: { field: string; limit: string }[];
  };
  assert.equal(error.code, 'POLICY_DENIED');
  assert.deepEqual(
    error.violations.map((v) => [v.field, v.limit]),
    [['timeoutSeconds', '30s']],
  );

  const invalid = await callTool(client, 'run_code', { code: 'print(1)', language: 'cobol' });
  assert.equal(invalid.isError, true);
  assert.match(
    textOf(invalid),
    /template: unknown template "cobol" \(limit: python, python-data, node, bash, c, rust\)/,
  );

  const missing = await callTool(client, 'get_run', { runId: 'run-000000000000' });
  assert.equal(missing.isError, true);
  assert.match(textOf(missing), /^NOT_FOUND/);
}

/** logging/setLevel above info silences the output log notifications; progress still flows. */
export async function logLevelIsHonoured(client: Client): Promise<void> {
  const { notices } = recordNotifications(client);
  await client.setLoggingLevel('warning');
  try {
    const progress: string[] = [];
    const r = (await client.callTool({ name: 'run_code', arguments: { code: "print('quiet')" } }, undefined, {
      onprogress: (p) => void progress.push(p.message ?? ''),
    })) as CallToolResult;
    assert.equal(structured(r).stdout, 'quiet\n');
    assert.deepEqual(notices, [], 'no log notifications above the level the client set');
    assert.ok(
      progress.some((p) => p.startsWith('run ')),
      `progress still arrives: ${JSON.stringify(progress)}`,
    );
  } finally {
    await client.setLoggingLevel('debug');
  }
}
