import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ExecRequestSchema, SessionRequestSchema } from '../../../src/api/session.js';
import { RunnerSession, type SessionHost } from '../../../src/backends/session-sandbox.js';
import type { ExecExecution, SandboxEnd } from '../../../src/backends/sessions.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { evaluateExec, evaluateSession } from '../../../src/policy/session.js';
import { SessionClient } from '../../../src/runner/session-client.js';
import { AppError } from '../../../src/shared/errors.js';

/** A session over a runner that says nothing, whose sandbox ends as `end` says once its transport closes. */
function sessionEndingAs(end: SandboxEnd): {
  session: RunnerSession;
  client: SessionClient;
  exec: () => ExecExecution;
} {
  const client = new SessionClient({ write: () => Promise.resolve() }, Buffer.alloc(16));
  const host: SessionHost = {
    gone: new Promise(() => {}),
    endOf: () => Promise.resolve(end),
    remove: () => Promise.resolve(),
    retire: () => Promise.resolve(),
    detach: () => {},
  };
  const policy = createPolicy();
  const evaluated = evaluateSession(SessionRequestSchema.parse({ template: 'python' }), policy);
  assert.ok(evaluated.ok);
  const session = new RunnerSession({ sessionId: 'ses-1', client, host, spec: evaluated.spec });
  const request = ExecRequestSchema.parse({ command: ['python3', 'bomb.py'] });
  const exec = evaluateExec(request, evaluated.spec, policy);
  assert.ok(exec.ok);
  return { session, client, exec: () => session.exec(exec.exec, { execId: 'exec-1', onOutput: () => {} }) };
}

// Under gVisor the host's OOM killer sees one process, the sandbox: a memory bomb run by an exec
// takes the runner with it (found by the hostile tier's memory bomb in runsc sessions).
describe("an exec under way when its session's sandbox ends by itself", () => {
  test('ends Failed with reason OOMKilled (exit 137) when the sandbox died of OOM', async () => {
    const { client, exec: start } = sessionEndingAs({ reason: 'OOMKilled', message: 'out of memory' });
    const exec = start();
    client.transportClosed('the container stopped');
    const { outcome } = await exec.result;
    assert.deepEqual([outcome.phase, outcome.reason, outcome.exitCode], ['Failed', 'OOMKilled', 137]);
  });

  test("fails with the runner's loss (BACKEND_ERROR) when the sandbox ended any other way", async () => {
    const { client, exec: start } = sessionEndingAs({ reason: 'RunnerGone', message: 'gone' });
    const exec = start();
    client.transportClosed('the container stopped');
    await assert.rejects(exec.result, (e: unknown) => e instanceof AppError && e.code === 'BACKEND_ERROR');
  });
});
