/**
 * Runs belong to the principal that started them, known by its id (its token's digest), never by
 * its display name: a second token with the same name can neither read nor cancel them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classify } from '../../../src/api/outcome.js';
import { buildResult } from '../../../src/api/result.js';
import type { RunExecution, SandboxBackend } from '../../../src/backends/types.js';
import type { Principal } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';

/** Runs nothing: each run stays live until its signal aborts, then ends Cancelled. */
const backend: SandboxBackend = {
  name: 'docker',
  start(spec, { runId, signal }): RunExecution {
    const result = new Promise<ReturnType<typeof buildResult>>((resolve) =>
      signal?.addEventListener('abort', () =>
        resolve(
          buildResult({
            runId,
            subject: spec,
            outcome: classify({ exitCode: null, timedOut: false, oomKilled: false, cancelled: true }),
            startedAt: 0,
            finishedAt: 1,
            backend: 'docker',
          }),
        ),
      ),
    );
    return { runId, output: (async function* () {})(), result, cleanedUp: result.then(() => undefined) };
  },
  health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'test' }),
  close: () => Promise.resolve(),
};

const notFound = (e: unknown): boolean => e instanceof AppError && e.code === 'NOT_FOUND';

test('a principal with the same name but another token neither reads nor cancels the run', async () => {
  const service = new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 4, maxQueued: 0 },
  });
  const admin: Principal = { id: 'token:aaaaaaaaaaaaaaaa', name: 'default', scope: {} };
  const impostor: Principal = {
    id: 'token:bbbbbbbbbbbbbbbb',
    name: 'default',
    scope: { templates: ['bash'] },
  };
  const handle = await service.runs.start({ template: 'python', code: 'print(1)' }, admin);
  assert.throws(() => service.runs.get(handle.runId, impostor), notFound);
  await assert.rejects(service.runs.cancel(handle.runId, impostor), notFound);
  assert.equal(service.runs.get(handle.runId, admin).phase, 'Running');
  assert.equal((await service.runs.cancel(handle.runId, admin)).phase, 'Cancelled');
  await handle.result;
});
