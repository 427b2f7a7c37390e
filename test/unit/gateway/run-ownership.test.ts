/**
 * Runs belong to the principal that started them, known by its id (its token's digest), never by
 * its display name: a second token with the same name can neither read nor cancel them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildResult } from '../../../src/api/result.js';
import type { RunExecution, SandboxBackend } from '../../../src/backends/types.js';
import { LOCAL_PRINCIPAL, type Principal } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';
import { cancelledResult } from '../../support/cancelled-result.js';

/** Runs nothing: each run stays live until its signal aborts, then ends Cancelled. */
const backend: SandboxBackend = {
  name: 'docker',
  start(spec, { runId, signal }): RunExecution {
    const result = new Promise<ReturnType<typeof buildResult>>((resolve) =>
      signal?.addEventListener('abort', () => resolve(cancelledResult(spec, runId, 'docker'))),
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
  await assert.rejects(service.runs.get(handle.runId, impostor), notFound);
  await assert.rejects(service.runs.cancel(handle.runId, impostor), notFound);
  assert.equal((await service.runs.get(handle.runId, admin)).phase, 'Running');
  assert.equal((await service.runs.cancel(handle.runId, admin)).phase, 'Cancelled');
  await handle.result;
});

test('a run this process does not know is asked of the backend’s records, as its owner (id and namespace)', async () => {
  const service0 = new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 1, maxQueued: 0 },
  });
  const asked: { op: string; runId: string; owner: unknown }[] = [];
  const recorded = buildResult({
    runId: 'run-elsewhere',
    subject: service0.runs.plan({ template: 'python', code: 'print(1)' }, LOCAL_PRINCIPAL),
    outcome: { phase: 'Running', exitCode: null },
    startedAt: 0,
    finishedAt: undefined,
    backend: 'kubernetes',
  });
  const service = new SandpitService({
    backend: {
      ...backend,
      runs: {
        get: (runId, owner) => {
          asked.push({ op: 'get', runId, owner });
          return Promise.resolve(runId === 'run-elsewhere' ? recorded : undefined);
        },
        cancel: (runId, owner) => {
          asked.push({ op: 'cancel', runId, owner });
          return Promise.resolve(runId === 'run-elsewhere' ? { ...recorded, phase: 'Cancelled' } : undefined);
        },
        tasks: () => Promise.resolve([]),
      },
    },
    policy: createPolicy(),
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 4, maxQueued: 0 },
  });
  const tenant: Principal = { id: 'token:cccccccccccccccc', name: 'a', scope: {}, namespace: 'team-a' };
  assert.equal((await service.runs.get('run-elsewhere', tenant)).phase, 'Running');
  assert.equal((await service.runs.cancel('run-elsewhere', tenant)).phase, 'Cancelled');
  await assert.rejects(service.runs.get('run-unknown', tenant), notFound);
  await assert.rejects(service.runs.cancel('run-unknown', tenant), notFound);
  assert.deepEqual(
    asked.map((a) => [a.op, a.runId, (a.owner as Principal).id, (a.owner as Principal).namespace]),
    [
      ['get', 'run-elsewhere', tenant.id, 'team-a'],
      ['cancel', 'run-elsewhere', tenant.id, 'team-a'],
      ['get', 'run-unknown', tenant.id, 'team-a'],
      ['cancel', 'run-unknown', tenant.id, 'team-a'],
    ],
  );
});

test('a run this process follows is never asked of the records, and another owner’s is not found here', async () => {
  let asked = 0;
  const counting = {
    get: () => (asked++, Promise.resolve(undefined)),
    cancel: () => (asked++, Promise.resolve(undefined)),
    tasks: () => Promise.resolve([]),
  };
  const service = new SandpitService({
    backend: { ...backend, runs: counting },
    policy: createPolicy(),
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 4, maxQueued: 0 },
  });
  const owner: Principal = { id: 'token:aaaaaaaaaaaaaaaa', name: 'a', scope: {} };
  const other: Principal = { id: 'token:bbbbbbbbbbbbbbbb', name: 'b', scope: {} };
  const handle = await service.runs.start({ template: 'python', code: 'print(1)' }, owner);
  await assert.rejects(service.runs.get(handle.runId, other), notFound);
  assert.equal((await service.runs.get(handle.runId, owner)).phase, 'Running');
  assert.equal((await service.runs.cancel(handle.runId, owner)).phase, 'Cancelled');
  await handle.result;
  assert.equal(asked, 0);
});
