/**
 * Input the runner would refuse (a NUL byte in argv or env, a file where another needs a
 * directory) is refused as INVALID_REQUEST before any container exists, and counted as a refused
 * request, never as a run that failed in the backend.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type Docker from 'dockerode';
import type { DockerBackend } from '../../../src/backends/docker/docker-backend.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';
import { makeBackend, requireDocker } from '../../support/docker.js';

let docker: Docker;
let backend: DockerBackend;
before(async () => {
  docker = await requireDocker();
  backend = await makeBackend(docker);
});
after(() => backend.close());

const CASES = {
  'a NUL byte in an argv element': { template: 'bash', command: ['echo', 'a\u0000b'] },
  'a NUL byte in an env value': {
    template: 'python',
    code: 'print(1)',
    env: [{ name: 'X', value: 'a\u0000' }],
  },
  'a file where another file needs a directory': {
    template: 'python',
    code: 'print(1)',
    files: [
      { path: 'a', content: '1' },
      { path: 'a/b', content: '2' },
    ],
  },
};

test('refused before any sandbox exists, as INVALID_REQUEST, and never counted as a backend error', async () => {
  const metrics = createMetrics();
  const service = new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics,
    slots: { maxConcurrent: 2, maxQueued: 0 },
  });
  // This backend's own: other tiers may run sandboxes on the engine meanwhile (test/run-all.sh).
  const runContainers = async (): Promise<number> =>
    (
      await docker.listContainers({
        all: true,
        filters: { label: ['sandpit.dev/kind=run', `sandpit.dev/owner=${backend.owner}`] },
      })
    ).length;
  const containersBefore = await runContainers();
  for (const [name, input] of Object.entries(CASES)) {
    await assert.rejects(
      service.runs.run(input, LOCAL_PRINCIPAL),
      (e: unknown) => e instanceof AppError && e.code === 'INVALID_REQUEST',
      name,
    );
  }
  assert.equal(await runContainers(), containersBefore, 'no container was made');
  const counted = await metrics.registry.getSingleMetricAsString('sandpit_rejected_requests_total');
  assert.match(counted, /sandpit_rejected_requests_total\{code="INVALID_REQUEST",component="gateway"\} 3/);
  const runs = await metrics.registry.getSingleMetricAsString('sandpit_runs_total');
  assert.doesNotMatch(runs, /BackendError/);
});
