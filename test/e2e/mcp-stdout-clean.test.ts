/**
 * `sandpit mcp` at debug level: every byte on stdout is JSON-RPC (one message per line), every log
 * line goes to stderr, and logs carry sizes and digests but never the code, its output or env values.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { before, test } from 'node:test';
import { requireDocker } from '../support/docker.js';
import { CLI, cleanEnv, ensureBuilt, stopProcess } from './helpers.js';

before(async () => {
  await requireDocker();
  ensureBuilt();
});

test('stdout carries only JSON-RPC while logging at debug level', async () => {
  const child = spawn(process.execPath, [CLI, 'mcp'], {
    env: cleanEnv({ SANDPIT_LOGGING_LEVEL: 'debug' }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stdoutLines: string[] = [];
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const responses = new Map<number, Record<string, unknown>>();
  const waiters = new Map<number, () => void>();
  createInterface({ input: child.stdout }).on('line', (line) => {
    stdoutLines.push(line);
    try {
      const msg = JSON.parse(line) as { id?: number };
      if (typeof msg.id === 'number') {
        responses.set(msg.id, msg);
        waiters.get(msg.id)?.();
      }
    } catch {
      // recorded; asserted below
    }
  });
  const request = (id: number, method: string, params: object): Promise<Record<string, unknown>> => {
    const answered = new Promise<void>((resolve) => waiters.set(id, resolve));
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    return answered.then(() => responses.get(id)!);
  };

  const SECRET_CODE = 'print("the-secret-output-" + "x" * 3)\nimport os\nprint(os.environ["API_KEY"])';
  await request(1, 'initialize', {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'raw', version: '1' },
  });
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  await request(2, 'tools/list', {});
  const run = await request(3, 'tools/call', {
    name: 'run_code',
    arguments: { code: SECRET_CODE, env: [{ name: 'API_KEY', value: 'sk-env-value-never-logged' }] },
    _meta: { progressToken: 'p' },
  });
  await request(4, 'tools/call', {
    name: 'run_code',
    arguments: { code: 'print(1)', timeoutSeconds: 99999 },
  });
  child.stdin.end();
  assert.equal(await stopProcess(child), 0);

  const result = run.result as { structuredContent: { stdout: string } };
  assert.equal(result.structuredContent.stdout, 'the-secret-output-xxx\nsk-env-value-never-logged\n');
  assert.ok(stdoutLines.length >= 8, 'responses and notifications arrived');
  for (const line of stdoutLines) {
    const msg = JSON.parse(line) as { jsonrpc?: string };
    assert.equal(msg.jsonrpc, '2.0', `not JSON-RPC on stdout: ${line}`);
  }
  const logLines = stderr.trim().split('\n');
  assert.ok(
    logLines.some((l) => l.includes('"level":20')),
    'debug lines were logged (to stderr)',
  );
  assert.ok(
    logLines.some(
      (l) => l.includes('"msg":"audit"') && l.includes('"event":"run"') && l.includes('"digest":"sha256:'),
    ),
    'audit record with a digest',
  );
  assert.ok(
    logLines.some((l) => l.includes('"msg":"tool call"') && l.includes('"argBytes"')),
    'tool calls logged by size',
  );
  for (const secret of ['the-secret-output', 'sk-env-value-never-logged', 'API_KEY', '"x" * 3']) {
    assert.ok(!stderr.includes(secret), `the log contains "${secret}"`);
  }
});
