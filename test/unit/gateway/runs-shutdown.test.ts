/**
 * What a gateway shutdown does to the runs it follows: a run that no call waits on (an MCP task's,
 * a REST `?wait=false` run), on a backend that records runs beyond the process (Kubernetes), is released (followed no more, nothing
 * cancelled, its slot free, its record answering for it); every other run is cancelled, and on a
 * backend whose runs live in the process (Docker) a task's run is cancelled too.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunResult } from '../../../src/api/run.js';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import type { RunHandle } from '../../../src/gateway/run-handle.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics, type Metrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';
import { liveRunsBackend } from '../../support/live-runs-backend.js';

const RUN = { template: 'python', code: 'print(1)' };

function serviceOf(backend: SandboxBackend, metrics: Metrics = createMetrics()): SandpitService {
  return new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics,
    slots: { maxConcurrent: 4, maxQueued: 0 },
  });
}

/** How the run ended for its caller: its result, or the AppError its result rejected with. */
async function settle(h: RunHandle): Promise<RunResult | AppError> {
  try {
    return await h.result;
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
}

test('on a backend that records runs, a task is released and a plain run cancelled', async () => {
  const { backend, started } = liveRunsBackend(true);
  const metrics = createMetrics();
  const service = serviceOf(backend, metrics);
  const plain = await service.runs.start(RUN, LOCAL_PRINCIPAL);
  const task = await service.runs.start(RUN, LOCAL_PRINCIPAL, { detached: true });
  assert.equal((await service.health()).running, 2);

  await service.shutdown();

  assert.equal(started.get(plain.runId)?.signal.aborted, true, 'the plain run is cancelled');
  assert.equal(((await settle(plain)) as RunResult).phase, 'Cancelled');
  assert.equal(started.get(task.runId)?.released, true, 'the task is released');
  assert.equal(started.get(task.runId)?.signal.aborted, false, 'and not cancelled');
  const left = await settle(task);
  assert.ok(left instanceof AppError && left.code === 'ENGINE_UNAVAILABLE');
  assert.equal((await service.health()).running, 0, 'both slots are free');

  // This process no longer answers for the released run: its record does.
  assert.equal((await service.runs.get(task.runId, LOCAL_PRINCIPAL)).phase, 'Running');
  assert.deepEqual(
    service.runs.finished(LOCAL_PRINCIPAL).map((r) => r.runId),
    [plain.runId],
  );
  const text = await metrics.registry.metrics();
  const counted = text.split('\n').filter((l) => l.startsWith('sandpit_runs_total{'));
  assert.deepEqual(
    counted,
    ['sandpit_runs_total{backend="kubernetes",phase="Cancelled",reason="Cancelled",component="gateway"} 1'],
    'the released run is not counted by this process',
  );
  assert.match(text, /sandpit_active_runs\{backend="kubernetes",component="gateway"\} 0/);
});

test('a run that is not live at shutdown is neither cancelled nor released', async () => {
  const { backend, started } = liveRunsBackend(true);
  const service = serviceOf(backend);
  const task = await service.runs.start(RUN, LOCAL_PRINCIPAL, { detached: true });
  await service.runs.cancel(task.runId, LOCAL_PRINCIPAL);
  await service.shutdown();
  assert.equal(started.get(task.runId)?.released, false);
  assert.equal(((await settle(task)) as RunResult).phase, 'Cancelled');
});

test('on a backend whose runs live in the process (Docker), a task is cancelled like any run', async () => {
  const { backend, started } = liveRunsBackend(false);
  const service = serviceOf(backend);
  const task = await service.runs.start(RUN, LOCAL_PRINCIPAL, { detached: true });
  await service.shutdown();
  assert.equal(started.get(task.runId)?.signal.aborted, true);
  assert.equal(((await settle(task)) as RunResult).phase, 'Cancelled');
  assert.equal((await service.health()).running, 0);
});

test('a REST ?wait=false run (submit) is released like a task where runs are recorded, cancelled where not', async () => {
  for (const recorded of [true, false]) {
    const { backend, started } = liveRunsBackend(recorded);
    const service = serviceOf(backend);
    const submitted = await service.runs.submit(RUN, LOCAL_PRINCIPAL);
    await service.shutdown();
    const run = started.get(submitted.runId);
    assert.equal(run?.released, recorded, `released: ${recorded}`);
    assert.equal(run?.signal.aborted, !recorded, `cancelled: ${!recorded}`);
  }
});
