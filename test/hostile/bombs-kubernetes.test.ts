// The resource bombs on the Kubernetes backend, in each configuration bombConfigs('kubernetes') gives:
// SandboxRuns and Sandboxes reconciled by one real operator on the test cluster.
import { after } from 'node:test';
import { bombCases } from './bomb-cases.js';
import { kubernetesTargets } from './kubernetes-target.js';
import { bombConfigs } from './untrusted.js';

const targets = kubernetesTargets(bombConfigs('kubernetes'));
after(() => targets.close());

for (const config of bombConfigs('kubernetes')) bombCases(config, () => targets.target(config));
