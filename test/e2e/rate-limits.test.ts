/**
 * Per-principal rate limits through the built CLI's `serve` on Docker: runs a minute and output
 * bytes a minute, one token's spent limit refusing its own next run (429 with Retry-After over
 * REST, an isError result saying when over MCP) while another token's runs go on; and the
 * docs' idempotency example: a repeat of a requestId over REST is the same run, and counts nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { requireDocker } from '../support/docker.js';
import { callTool, connectHttp, ensureBuilt, startServe, textOf, type Served } from './helpers.js';

const ALICE = 'alice-token-0123456789';
const BOB = 'bob-token-0123456789';
const CAROL = 'carol-token-0123456789';
const DAVE = 'dave-token-0123456789';

const CONFIG = {
  auth: {
    tokens: [
      { name: 'alice', token: ALICE },
      { name: 'bob', token: BOB },
      { name: 'carol', token: CAROL, runsPerMinute: 100, outputBytesPerMinute: 1000 },
      { name: 'dave', token: DAVE, runsPerMinute: 1 },
    ],
  },
  sandbox: { runsPerMinute: 2 },
};

describe('per-principal rate limits (serve, Docker)', () => {
  let served: Served;

  before(async () => {
    await requireDocker();
    ensureBuilt();
    served = await startServe(CONFIG);
  });
  after(async () => {
    if (served) assert.equal(await served.stop(), 0, served.logs.join('\n'));
  });

  const run = (token: string, code: string, requestId?: string): Promise<Response> =>
    fetch(`${served.url}/runs`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ template: 'bash', code, ...(requestId ? { requestId } : {}) }),
    });

  test('docs/mcp.md: a repeat of a requestId over REST is the same run and counts nothing; another request under it is 409', async () => {
    const first = await run(DAVE, 'echo built', 'build-42');
    assert.equal(first.status, 200);
    const { runId, stdout } = (await first.json()) as { runId: string; stdout: string };
    assert.equal(stdout, 'built\n');
    // Dave may start one run a minute: the repeat is allowed, because it starts nothing.
    const again = await run(DAVE, 'echo built', 'build-42');
    assert.equal(again.status, 200);
    assert.equal(((await again.json()) as { runId: string }).runId, runId);
    const other = await run(DAVE, 'echo other', 'build-42');
    assert.equal(other.status, 409);
    assert.equal(((await other.json()) as { error: { code: string } }).error.code, 'CONFLICT');
    assert.equal((await run(DAVE, 'echo new')).status, 429, 'the limit of one run a minute was spent once');
  });

  test("runs a minute: the third run of a token is refused with Retry-After; another token's runs go on", async () => {
    for (const code of ['echo 1', 'echo 2']) assert.equal((await run(ALICE, code)).status, 200);
    const refused = await run(ALICE, 'echo 3');
    assert.equal(refused.status, 429);
    const seconds = Number(refused.headers.get('retry-after'));
    assert.ok(seconds >= 1 && seconds <= 60, `Retry-After: ${seconds}`);
    const body = (await refused.json()) as {
      error: { code: string; message: string; retryAfterSeconds: number };
    };
    assert.equal(body.error.code, 'BUSY');
    assert.match(body.error.message, /"alice" started 2 runs in the last minute, its limit/);
    assert.equal(body.error.retryAfterSeconds, seconds);

    const other = await run(BOB, 'echo bob');
    assert.equal(other.status, 200, await other.clone().text());
    assert.equal(((await other.json()) as { stdout: string }).stdout, 'bob\n');

    // Over MCP the refusal is a tool error that says when to retry.
    const c = await connectHttp(`${served.url}/mcp`, ALICE);
    try {
      const result = await callTool(c.client, 'run_code', { language: 'bash', code: 'echo 4' });
      assert.equal(result.isError, true);
      assert.match(textOf(result), /^BUSY: busy, retry later: "alice" started 2 runs/);
      assert.match(textOf(result), /retry after: \d+ s/);
    } finally {
      await c.close();
    }
  });

  test("output bytes a minute: a token whose runs wrote its limit is refused; another token's are not", async () => {
    const big = await run(CAROL, 'head -c 2000 /dev/zero | tr "\\0" x');
    assert.equal(big.status, 200);
    assert.equal(((await big.json()) as { stdoutBytes: number }).stdoutBytes, 2000);
    const refused = await run(CAROL, 'echo more');
    assert.equal(refused.status, 429);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    const body = (await refused.json()) as { error: { message: string } };
    assert.match(body.error.message, /"carol"'s runs wrote 2000 bytes of output in the last minute/);
    assert.equal((await run(BOB, 'head -c 2000 /dev/zero | tr "\\0" y')).status, 200);
  });
});
