/**
 * A sandbox is removed on every path (success, error, timeout, abort, a crashed caller), refusals
 * happen before any container exists, and engine failures arrive as typed errors with a fix.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import type Docker from 'dockerode';
import { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';
import {
  createdSince,
  makeBackend,
  requireDocker,
  runContainers,
  runId,
  sandpitContainers,
  spec,
} from '../../support/docker.js';
import { engineStretch } from '../../support/timing.js';

let docker: Docker;
let backend: DockerBackend;
before(async () => {
  docker = await requireDocker();
  backend = await makeBackend(docker);
});
after(() => backend.close());

for (const [name, request] of [
  ['success', { template: 'bash', code: 'true' }],
  ['error exit', { template: 'bash', code: 'exit 9' }],
  ['timeout', { template: 'bash', code: 'sleep 30', timeoutSeconds: 1 }],
] as const) {
  test(`the container is removed after ${name}`, async () => {
    const id = runId();
    const execution = backend.start(spec(request), { runId: id });
    await execution.result;
    await execution.cleanedUp;
    assert.deepEqual(await sandpitContainers(docker, id), []);
  });
}

test('an abort mid-run cancels it and leaves no container behind', async () => {
  const id = runId();
  const controller = new AbortController();
  const execution = backend.start(spec({ template: 'bash', code: 'echo started; sleep 30' }), {
    runId: id,
    signal: controller.signal,
  });
  for await (const chunk of execution.output) {
    if (chunk.data.toString().includes('started')) break;
  }
  assert.equal((await runContainers(docker, id, 1)).length, 1, 'the sandbox runs before the abort');
  const t0 = performance.now();
  controller.abort();
  const r = await execution.result;
  await execution.cleanedUp;
  assert.equal(r.phase, 'Cancelled');
  assert.equal(r.reason, 'Cancelled');
  const slow = await engineStretch(backend);
  assert.ok(performance.now() - t0 < 3000 * slow, 'the abort took effect promptly');
  assert.deepEqual(await sandpitContainers(docker, id), []);
});

test("a crashed caller's container is reaped at the next start-up", async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/crashing-caller.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const id = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => resolve(b.toString().trim()));
    child.on('exit', (code) => reject(new Error(`crashing caller exited early (${code})`)));
  });
  assert.equal((await sandpitContainers(docker, id)).length, 1);
  child.kill('SIGKILL');
  await new Promise((r) => child.on('exit', r));
  assert.equal((await sandpitContainers(docker, id)).length, 1, 'the dead caller left its container');
  const reaped = await new DockerBackend({ docker }).reap();
  assert.ok(
    reaped.some((name) => name.includes(id)),
    `reaped ${reaped.join(', ')}`,
  );
  assert.deepEqual(await sandpitContainers(docker, id), []);
});

test('the reaper leaves the containers of a live owner alone', async () => {
  const id = runId();
  const controller = new AbortController();
  const execution = backend.start(spec({ template: 'bash', code: 'echo up; sleep 30' }), {
    runId: id,
    signal: controller.signal,
  });
  for await (const chunk of execution.output) if (chunk.data.toString().includes('up')) break;
  await new DockerBackend({ docker }).reap();
  assert.equal((await sandpitContainers(docker, id)).length, 1);
  controller.abort();
  await execution.cleanedUp;
});

/**
 * Container create events this process causes while `fn` runs. With warm pools, the window opens
 * once they are full: an earlier test's warm run has its replacement started after its result.
 */
async function createsDuring(fn: () => Promise<unknown>): Promise<string[]> {
  if (backend.pool && !(await backend.pool.filled(60_000)))
    throw new Error('the warm pools did not refill in 60 s');
  const since = Date.now();
  await fn().catch(() => {});
  await new Promise((r) => setTimeout(r, 300));
  return createdSince(docker, backend.owner, since);
}

test('an image outside the allowlist, or a limit over a ceiling, is refused before any container exists', async () => {
  const service = new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 2, maxQueued: 2 },
  });
  for (const request of [
    { image: 'alpine:3', command: ['true'] },
    { template: 'python', code: 'print(1)', resources: { memory: '4g' } },
    { template: 'python', code: 'print(1)', timeoutSeconds: 3600 },
  ]) {
    let error: unknown;
    const events = await createsDuring(() =>
      service.runs.run(request, LOCAL_PRINCIPAL).catch((e: unknown) => (error = e)),
    );
    assert.ok(error instanceof AppError && error.code === 'POLICY_DENIED', `refused: ${String(error)}`);
    assert.deepEqual(events, [], `no container was created for ${JSON.stringify(request)}`);
  }
});

test('engine failures are typed errors that name the fix', async (t) => {
  await t.test('engine down', async () => {
    const down = new DockerBackend({ socketPath: '/nonexistent/docker.sock' });
    await assert.rejects(
      down.start(spec({ template: 'bash', code: 'true' }), { runId: runId() }).result,
      (e: AppError) => {
        assert.equal(e.code, 'ENGINE_UNAVAILABLE');
        assert.match(e.hint ?? '', /sandpit setup/);
        return true;
      },
    );
  });
  await t.test('image missing', async () => {
    const request = { image: 'sandpit/python:0.0-missing', command: ['true'] };
    await assert.rejects(
      backend.start(spec(request, { imageAllowlist: ['sandpit/*'] }), { runId: runId() }).result,
      (e: AppError) => {
        assert.equal(e.code, 'IMAGE_NOT_FOUND');
        assert.match(e.hint ?? '', /sandpit images build/);
        return true;
      },
    );
  });
  await t.test('runtime unknown', async () => {
    const request = { template: 'bash', code: 'true', runtime: 'kata-nope' };
    await assert.rejects(
      backend.start(spec(request, { allowedRuntimes: ['kata-nope'] }), { runId: runId() }).result,
      (e: AppError) => {
        assert.equal(e.code, 'RUNTIME_NOT_FOUND');
        assert.match(e.message, /kata-nope/);
        return true;
      },
    );
  });
});
