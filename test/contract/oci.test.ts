// The contract cases against the oci backend: real containers made by runc (and runsc for the
// gVisor cases) straight from bundles, no engine on the critical path; runs and sessions.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { LABELS } from '../../src/backends/docker/labels.js';
import { bundlesDir, containerId } from '../../src/backends/oci/layout.js';
import { eventually } from '../support/sessions.js';
import { sessionContractCases } from './session-cases.js';
import type { OciBackend } from '../../src/backends/oci/oci-backend.js';
import { makeOciBackend, OCI_LAYOUT, ociLeftovers } from '../support/oci.js';
import { contractCases } from './cases.js';
import { idempotencyCases } from './idempotency-cases.js';
import { contractPolicy, CountingBackend, createService, type ContractTarget } from './target.js';

let target: ContractTarget;
let inner: OciBackend;

/** The bundles of this backend's runs that exist now. */
async function ownBundles(): Promise<string[]> {
  const ids = await readdir(bundlesDir(OCI_LAYOUT)).catch((): string[] => []);
  const own: string[] = [];
  for (const id of ids) {
    const config = await readFile(join(bundlesDir(OCI_LAYOUT), id, 'config.json'), 'utf8').catch(() => '{}');
    const annotations = (JSON.parse(config) as { annotations?: Record<string, string> }).annotations ?? {};
    if (annotations[LABELS.owner] === inner.owner && annotations[LABELS.kind] === 'run') own.push(id);
  }
  return own;
}

describe('contract: oci backend', () => {
  before(async () => {
    inner = await makeOciBackend();
    const backend = new CountingBackend(inner);
    // One sandbox per run (its container id), named with whatever of it is still on the host.
    const sandboxesOf = async (runId: string): Promise<string[]> => {
      const traces = await ociLeftovers(containerId(runId));
      return traces.length > 0 ? [`${containerId(runId)}: ${traces.join(', ')}`] : [];
    };
    const service = createService(backend, contractPolicy(['runc', 'runsc']));
    target = {
      name: 'oci',
      backend,
      service,
      sandboxesOf,
      async waitSandboxesGone(runId, timeoutMs) {
        const deadline = Date.now() + timeoutMs;
        while ((await sandboxesOf(runId)).length > 0) {
          if (Date.now() > deadline)
            throw new Error(`the sandbox of ${runId} still exists after ${timeoutMs} ms`);
          await new Promise((r) => setTimeout(r, 100));
        }
      },
      sandboxCount: async () => (await ownBundles()).length,
      async waitSessionGone(sessionId, timeoutMs) {
        const id = containerId(`session-${sessionId}`);
        if (!(await eventually(async () => (await ociLeftovers(id)).length === 0, timeoutMs)))
          throw new Error(`the sandbox of session ${sessionId} still exists after ${timeoutMs} ms`);
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
