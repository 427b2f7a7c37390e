// The escape catalogue and the leak cases on the Docker backend, in each configuration configs('docker') gives.
import { after } from 'node:test';
import { dockerTargets } from './docker-target.js';
import { escapeCases } from './escape-cases.js';
import { leakCases } from './leak-cases.js';
import { configs } from './untrusted.js';

const targets = dockerTargets();
after(() => targets.close());

for (const config of configs('docker')) {
  escapeCases(config, () => targets.target(config));
  // Pools keep state between runs, and sessions are the long-lived sandboxes: leaks are theirs.
  if (config.warm || config.path === 'session') leakCases(config, () => targets.target(config));
}
