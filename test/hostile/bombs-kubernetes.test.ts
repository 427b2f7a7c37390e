// The resource bombs on the Kubernetes backend, in each configuration configs('kubernetes') gives:
// SandboxRuns and Sandboxes reconciled by one real operator on the test cluster.
import { after } from 'node:test';
import { bombCases } from './bomb-cases.js';
import { kubernetesTargets } from './kubernetes-target.js';
import { configs } from './untrusted.js';

const targets = kubernetesTargets(configs('kubernetes'));
after(() => targets.close());

for (const config of configs('kubernetes')) bombCases(config, () => targets.target(config));
