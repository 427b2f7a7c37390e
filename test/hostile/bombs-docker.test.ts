// The resource bombs on the Docker backend, in each configuration configs('docker') gives.
import { after } from 'node:test';
import { bombCases } from './bomb-cases.js';
import { dockerTargets } from './docker-target.js';
import { configs } from './untrusted.js';

const targets = dockerTargets();
after(() => targets.close());

for (const config of configs('docker')) bombCases(config, () => targets.target(config));
