/**
 * The built CLI's `serve` (Streamable HTTP on 127.0.0.1), stateful and stateless, with the SDK's
 * real Client: every tool, streaming, cancellation, bearer auth (401s, scopes, sha256 tokens),
 * JSON-RPC errors for oversized bodies, Host validation, /health and /metrics.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import { requireDocker } from '../support/docker.js';
import {
  callTool,
  connectHttp,
  containersOfPid,
  ensureBuilt,
  recordNotifications,
  startServe,
  textOf,
  waitFor,
  type Served,
} from './helpers.js';
import {
  cancelRunTool,
  clientCancellationStopsTheRun,
  everyToolWorks,
  logLevelIsHonoured,
  outputStreamsBeforeResult,
  policyDenialNamesTheField,
} from './scenarios.js';
import { MCP_ACCEPT, rawInitialize } from '../support/mcp-raw.js';

const MAIN = 'main-token-0123456789';
const ALICE = 'alice-token-0123456789';
const BOB = 'bob-token-0123456789';
const POLICY_REQUEST_BYTES = 64 * 1024;

const CONFIG = {
  auth: {
    token: MAIN,
    tokens: [
      { name: 'alice', token: ALICE, templates: ['bash'], maxConcurrentRuns: 1 },
      { name: 'bob', tokenSha256: createHash('sha256').update(BOB).digest('hex') },
    ],
  },
  sandbox: { maxRequestBytes: POLICY_REQUEST_BYTES },
  logging: { level: 'debug' },
};

const INIT = rawInitialize();

/** The SDK client's HTTP errors carry the status as `code`. */
const httpStatus = (status: number) => (e: Error & { code?: number }) => {
  assert.equal(e.code, status, e.message);
  return true;
};

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      ...MCP_ACCEPT,
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

for (const mode of ['stateful', 'stateless'] as const) {
  describe(`sandpit serve (${mode}, built CLI)`, () => {
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
      if (!served) return;
      const code = await served.stop();
      assert.equal(code, 0, `serve exited with ${code}:\n${served.logs.join('\n')}`);
      assert.deepEqual(await containersOfPid(docker, served.pid), [], 'the server left no container behind');
    });

    const withClient = async (
      token: string,
      fn: (c: Awaited<ReturnType<typeof connectHttp>>) => Promise<void>,
    ): Promise<void> => {
      const c = await connectHttp(mcpUrl, token);
      try {
        await fn(c);
      } finally {
        await c.close();
      }
    };

    test('binds 127.0.0.1', () => assert.match(served.url, /^http:\/\/127\.0\.0\.1:\d+$/));
    test('every tool answers its happy path', () => withClient(MAIN, (c) => everyToolWorks(c.client)));
    test('output streams as notifications before the final result', () =>
      withClient(MAIN, async (c) => {
        await outputStreamsBeforeResult(c.client);
      }));
    test('a client cancellation stops the run and removes its container', () =>
      withClient(MAIN, (c) => clientCancellationStopsTheRun(c.client, docker, served.pid)));
    test('cancel_run stops a live run; the record stays readable', () =>
      withClient(MAIN, (c) => cancelRunTool(c.client, docker, served.pid)));
    test('a policy denial names its field and limit', () =>
      withClient(MAIN, (c) => policyDenialNamesTheField(c.client)));

    test('no token: 401 with WWW-Authenticate and a JSON-RPC body; the SDK client cannot connect', async () => {
      const res = await post(mcpUrl, INIT);
      assert.equal(res.status, 401);
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="sandpit"');
      const body = (await res.json()) as { jsonrpc: string; error: { code: number; message: string } };
      assert.equal(body.jsonrpc, '2.0');
      assert.match(body.error.message, /missing Authorization header/);
      await assert.rejects(connectHttp(mcpUrl), httpStatus(401));
    });

    test('a wrong token: 401 invalid_token', async () => {
      const res = await post(mcpUrl, INIT, { Authorization: 'Bearer not-a-valid-token' });
      assert.equal(res.status, 401);
      assert.match(
        res.headers.get('www-authenticate') ?? '',
        /^Bearer realm="sandpit", error="invalid_token"/,
      );
      await assert.rejects(connectHttp(mcpUrl, `${MAIN}x`), httpStatus(401));
    });

    test('token scopes: templates and per-token concurrency are enforced', () =>
      withClient(ALICE, async ({ client }) => {
        const denied = await callTool(client, 'run_code', { language: 'python', code: 'print(1)' });
        assert.equal(denied.isError, true);
        assert.match(
          textOf(denied),
          /template: template "python" is not allowed for this token \(limit: bash\)/,
        );
        const templates = (await callTool(client, 'list_templates')).structuredContent?.templates as {
          name: string;
        }[];
        assert.deepEqual(
          templates.map((t) => t.name),
          ['bash'],
        );

        const { notices } = recordNotifications(client);
        const long = callTool(client, 'run_command', { command: ['sh', '-c', 'echo up; sleep 60'] });
        const runId = await waitFor('the first run to start', () =>
          notices.some((n) => n.logger === 'stdout')
            ? (notices.find((n) => n.logger === 'sandpit')?.data as { runId: string }).runId
            : undefined,
        );
        const busy = await callTool(client, 'run_code', { language: 'bash', code: 'echo second' });
        assert.equal(busy.isError, true);
        assert.match(
          textOf(busy),
          /^BUSY: busy, retry later: "alice" already has 1 runs in progress, its limit/,
        );
        assert.match(textOf(busy), /retryable: yes/);
        await callTool(client, 'cancel_run', { runId });
        assert.equal((await long).structuredContent?.phase, 'Cancelled');
        const ok = await callTool(client, 'run_code', { language: 'bash', code: 'echo fine' });
        assert.equal(ok.structuredContent?.stdout, 'fine\n');
      }));

    test('a token configured as tokenSha256 works', () =>
      withClient(BOB, async ({ client }) => {
        const r = await callTool(client, 'execute_python_code', { code_string: 'print("bob")' });
        assert.equal(r.structuredContent?.stdout, 'bob\n');
      }));

    test('runs are private to their principal', () =>
      withClient(MAIN, async ({ client }) => {
        const r = await callTool(client, 'run_code', { code: 'print(1)' });
        const runId = r.structuredContent?.runId as string;
        await withClient(BOB, async (bob) => {
          const other = await callTool(bob.client, 'get_run', { runId });
          assert.equal(other.isError, true);
          assert.match(textOf(other), /^NOT_FOUND/);
        });
      }));

    test('an oversized request gets a clean JSON-RPC error, never HTML', async () => {
      const huge = {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'run_code', arguments: { code: `#${'x'.repeat(1024 * 1024)}` } },
      };
      const res = await post(mcpUrl, huge, { Authorization: `Bearer ${MAIN}` });
      assert.equal(res.status, 413);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      const text = await res.text();
      assert.doesNotMatch(text, /<html|<pre|at .*\.js:\d+/i);
      const body = JSON.parse(text) as {
        jsonrpc: string;
        error: { code: number; message: string; data: { code: string; hint: string } };
      };
      assert.equal(body.jsonrpc, '2.0');
      assert.equal(body.error.code, -32600);
      assert.equal(body.error.data.code, 'TOO_LARGE');
      assert.match(
        body.error.data.hint,
        /the policy allows 64Ki of code, files and stdin in all \(sandbox\.maxRequestBytes\)/,
      );

      await withClient(MAIN, async ({ client }) => {
        await assert.rejects(
          callTool(client, 'run_code', { code: `#${'x'.repeat(1024 * 1024)}` }),
          (e: Error & { code?: number }) => {
            assert.equal(e.code, 413);
            assert.match(e.message, /"code":-32600.*TOO_LARGE/);
            return true;
          },
        );
        // Under the body limit but over the policy's request size: a policy denial that names the field.
        const overPolicy = await callTool(client, 'run_code', {
          code: `#${'x'.repeat(POLICY_REQUEST_BYTES + 1000)}`,
        });
        assert.equal(overPolicy.isError, true);
        assert.match(textOf(overPolicy), /^POLICY_DENIED[\s\S]*- request: .* over the limit of 64/);
      });
    });

    test('malformed JSON gets a JSON-RPC parse error', async () => {
      const res = await post(mcpUrl, '{"jsonrpc": ', { Authorization: `Bearer ${MAIN}` });
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as { error: { code: number } }).error.code, -32700);
    });

    test('a foreign Host header is refused (DNS rebinding)', async () => {
      // fetch cannot set Host; node:http can.
      const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          mcpUrl,
          {
            method: 'POST',
            headers: {
              Host: 'evil.example',
              Authorization: `Bearer ${MAIN}`,
              'Content-Type': 'application/json',
            },
          },
          (res) => {
            let data = '';
            res.on('data', (d: Buffer) => (data += d.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify(INIT));
      });
      assert.equal(status, 403);
      assert.match(
        (JSON.parse(body) as { error: { message: string } }).error.message,
        /Host header "evil.example" is not allowed/,
      );
    });

    test('GET /health answers without auth', async () => {
      const res = await fetch(`${served.url}/health`);
      assert.equal(res.status, 200);
      const body = (await res.json()) as { status: string; backend: string };
      assert.equal(body.status, 'ok');
      assert.equal(body.backend, 'docker');
    });

    test('GET /metrics needs the token and serves Prometheus text', async () => {
      assert.equal((await fetch(`${served.url}/metrics`)).status, 401);
      const res = await fetch(`${served.url}/metrics`, { headers: { Authorization: `Bearer ${MAIN}` } });
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.match(text, /sandpit_tool_calls_total\{tool="run_code",outcome="ok",component="gateway"\} \d+/);
      assert.match(
        text,
        /sandpit_runs_total\{backend="docker",phase="Succeeded",reason="Completed",component="gateway"\} \d+/,
      );
      // The default metrics under their standard names.
      assert.match(text, /^process_cpu_seconds_total\{component="gateway"\} /m);
    });

    test('unknown paths get JSON 404s', async () => {
      const res = await fetch(`${served.url}/nope`);
      assert.equal(res.status, 404);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'NOT_FOUND');
    });

    if (mode === 'stateful') {
      test('logging/setLevel above info silences output logs, not progress', () =>
        withClient(MAIN, (c) => logLevelIsHonoured(c.client)));
      test('a session is bound to the token that opened it', async () => {
        const res = await post(mcpUrl, INIT, { Authorization: `Bearer ${MAIN}` });
        assert.equal(res.status, 200);
        const sid = res.headers.get('mcp-session-id');
        assert.ok(sid);
        await res.body?.cancel();
        const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
        const stolen = await post(mcpUrl, list, {
          Authorization: `Bearer ${BOB}`,
          'mcp-session-id': sid,
          'mcp-protocol-version': '2025-06-18',
        });
        assert.equal(stolen.status, 404);
        await stolen.body?.cancel();
        const del = await fetch(mcpUrl, {
          method: 'DELETE',
          headers: {
            Authorization: `Bearer ${MAIN}`,
            'mcp-session-id': sid,
            'mcp-protocol-version': '2025-06-18',
          },
        });
        assert.equal(del.status, 200);
      });
    } else {
      test('GET /mcp is 405 in stateless mode', async () => {
        const res = await fetch(mcpUrl, {
          headers: { Authorization: `Bearer ${MAIN}`, Accept: 'text/event-stream' },
        });
        assert.equal(res.status, 405);
      });
    }
  });
}

describe('sandpit serve refuses unsafe binds', () => {
  before(() => ensureBuilt());
  test('a non-loopback address without a token is refused', async () => {
    await assert.rejects(
      startServe({}, ['--host', '0.0.0.0']),
      /exited with 78[\s\S]*refusing to serve on 0\.0\.0\.0 without a token/,
    );
  });
});
