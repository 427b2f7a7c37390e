// The escape catalogue and the leak cases on the oci backend, in each configuration configs('oci') gives.
import { after } from 'node:test';
import { escapeCases } from './escape-cases.js';
import { leakCases } from './leak-cases.js';
import { ociTargets } from './oci-target.js';
import { configs } from './untrusted.js';

const targets = ociTargets();
after(() => targets.close());

for (const config of configs('oci')) {
  escapeCases(config, () => targets.target(config));
  // Pools keep state between runs, and sessions are the long-lived sandboxes: leaks are theirs.
  if (config.warm || config.path === 'session') leakCases(config, () => targets.target(config));
}
