/**
 * A run that nobody waits for (REST `POST /runs?wait=false`) is answered once every gateway
 * process can read it: on a backend that records runs (Kubernetes), once its record exists, so a
 * get_run through another replica in that instant finds it; elsewhere at once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunResult } from '../../../src/api/run.js';
import type { RunExecution, SandboxBackend } from '../../../src/backends/types.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';
import { cancelledResult } from '../../support/cancelled-result.js';

const RUN = { template: 'python', code: 'print(1)' };

/** Each run stays live until cancelled; `recorded` (when given) is what the backend reports of its record. */
function backendWith(recorded: () => Promise<void> | undefined, fail?: AppError): SandboxBackend {
  return {
    name: 'kubernetes',
    start(spec, { runId, signal }): RunExecution {
      const result = new Promise<RunResult>((resolve, reject) => {
        if (fail) return reject(fail);
        signal?.addEventListener('abort', () => resolve(cancelledResult(spec, runId, 'kubernetes')));
      });
      const r = recorded();
      return {
        runId,
        output: (async function* () {})(),
        result,
        cleanedUp: result.then(
          () => undefined,
          () => undefined,
        ),
        ...(r ? { recorded: r } : {}),
      };
    },
    health: () => Promise.resolve({ ok: true, backend: 'kubernetes', detail: 'test' }),
    close: () => Promise.resolve(),
  };
}

function service(backend: SandboxBackend): SandpitService {
  return new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics: createMetrics(),
    slots: { maxConcurrent: 4, maxQueued: 0 },
  });
}

test('submit() answers only once the backend has recorded the run, with the run Running', async () => {
  let record!: () => void;
  const s = service(backendWith(() => new Promise<void>((r) => (record = r))));
  const answered: { run?: RunResult } = {};
  const submitted = s.runs.submit(RUN, LOCAL_PRINCIPAL).then((r) => (answered.run = r));
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(answered.run, undefined, 'no answer before the record exists');
  record();
  const run = await submitted;
  assert.equal(run.phase, 'Running');
  assert.equal((await s.runs.cancel(run.runId, LOCAL_PRINCIPAL)).phase, 'Cancelled');
});

test('a backend that keeps runs per process: answered at once', async () => {
  const s = service(backendWith(() => undefined));
  const run = await s.runs.submit(RUN, LOCAL_PRINCIPAL);
  assert.equal(run.phase, 'Running');
  await s.runs.cancel(run.runId, LOCAL_PRINCIPAL);
});

test('a run that could not be recorded (a quota refusal) is answered with how it ended, nothing left unhandled', async () => {
  const busy = new AppError('BUSY', 'exceeded quota: sandboxruns');
  const s = service(backendWith(() => Promise.resolve(), busy));
  const run = await s.runs.submit(RUN, LOCAL_PRINCIPAL);
  assert.equal(run.phase, 'Failed', JSON.stringify(run));
  assert.match(run.message ?? '', /exceeded quota/);
});
