// The contract cases against the Docker backend: real containers on the real engine (cold, or warm
// pools with SANDPIT_TEST_POOL=on, as the docker tier runs them).
import { after, before, describe } from 'node:test';
import type Docker from 'dockerode';
import { LABELS, MANAGED_FILTER } from '../../src/backends/docker/labels.js';
import type { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { makeBackend, requireDocker, sandpitContainers } from '../support/docker.js';
import { eventually, sessionContainers } from '../support/sessions.js';
import { contractCases } from './cases.js';
import { idempotencyCases } from './idempotency-cases.js';
import { sessionContractCases } from './session-cases.js';
import { contractPolicy, CountingBackend, createService, type ContractTarget } from './target.js';

let target: ContractTarget;
let docker: Docker;
let inner: DockerBackend;

describe('contract: docker backend', () => {
  before(async () => {
    docker = await requireDocker();
    inner = await makeBackend(docker);
    const backend = new CountingBackend(inner);
    const sandboxesOf = (runId: string): Promise<string[]> => sandpitContainers(docker, runId);
    const service = createService(backend, contractPolicy(['runc', 'runsc']));
    target = {
      name: 'docker',
      backend,
      service,
      sandboxesOf,
      async waitSandboxesGone(runId, timeoutMs) {
        const deadline = Date.now() + timeoutMs;
        while ((await sandboxesOf(runId)).length > 0) {
          if (Date.now() > deadline)
            throw new Error(`containers of ${runId} still exist after ${timeoutMs} ms`);
          await new Promise((r) => setTimeout(r, 100));
        }
      },
      async sandboxCount() {
        const list = await docker.listContainers({
          all: true,
          filters: { label: [MANAGED_FILTER, `${LABELS.owner}=${inner.owner}`, `${LABELS.kind}=run`] },
        });
        return list.length;
      },
      async waitSessionGone(sessionId, timeoutMs) {
        const gone = await eventually(
          async () => (await sessionContainers(docker, sessionId)).length === 0,
          timeoutMs,
        );
        if (!gone)
          throw new Error(`the container of session ${sessionId} still exists after ${timeoutMs} ms`);
      },
      idlePrecisionMs: 2000,
      separateStderr: true,
      liveOutputUnderGvisor: true,
      gvisor: { runtime: 'runsc', service },
      overheadMs: 1500,
      keys: 'process',
    };
  });
  after(() => target?.service.shutdown());

  contractCases(() => target);
  sessionContractCases(() => target);
  idempotencyCases(() => target);
});
