// The escape catalogue on the Kubernetes backend: SandboxRuns reconciled by a real operator on the
// test cluster, made as the gateway's identity; under the default runtime (runc) and gVisor.
import { after } from 'node:test';
import type { KubernetesBackend } from '../../src/backends/kubernetes/kubernetes-backend.js';
import { startSuite, stopSuite, type Suite } from '../integration/kubernetes/operator-harness.js';
import { bindGatewayRbac, gatewayBackend } from '../contract/kube-gateway.js';
import { CONTRACT_SANDBOX_CONFIG } from '../contract/target.js';
import { withCluster } from '../support/kube/index.js';
import { escapeCases } from './escape-cases.js';

let suite: Promise<Suite> | undefined;

/** A gateway backend over the one operator suite this file starts. */
async function make(): Promise<KubernetesBackend> {
  suite ??= (async () => {
    const s = await startSuite(await withCluster(), 'hostile', {
      sandbox: CONTRACT_SANDBOX_CONFIG,
      kubernetes: { allowedRuntimeClasses: ['gvisor'] },
    });
    await bindGatewayRbac(s.cluster, s.ns);
    return s;
  })();
  const s = await suite;
  return gatewayBackend(s.cluster, s.ns);
}

after(async () => {
  if (suite) await stopSuite(await suite, false, (l) => process.stderr.write(`# ${l}\n`));
});

escapeCases('kubernetes, runc', make);
escapeCases('kubernetes, gvisor', make, 'gvisor');
