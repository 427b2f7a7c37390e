// The escape catalogue and the leak cases on the Kubernetes backend, in each configuration configs('kubernetes')
// gives: SandboxRuns and Sandboxes reconciled by one real operator on the test cluster.
import { after } from 'node:test';
import { escapeCases } from './escape-cases.js';
import { leakCases } from './leak-cases.js';
import { kubernetesTargets } from './kubernetes-target.js';
import { configs } from './untrusted.js';

const targets = kubernetesTargets(configs('kubernetes'));
after(() => targets.close());

for (const config of configs('kubernetes')) {
  escapeCases(config, () => targets.target(config));
  // Pools keep state between runs, and sessions are the long-lived sandboxes: leaks are theirs.
  if (config.warm || config.path === 'session') leakCases(config, () => targets.target(config));
}
