// The escape catalogue on the Docker backend, in each configuration configs('docker') gives.
import { after } from 'node:test';
import { dockerTargets } from './docker-target.js';
import { escapeCases } from './escape-cases.js';
import { configs } from './untrusted.js';

const targets = dockerTargets();
after(() => targets.close());

for (const config of configs('docker')) escapeCases(config, () => targets.target(config));
