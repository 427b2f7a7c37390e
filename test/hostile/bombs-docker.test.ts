// The resource bombs on the Docker backend, in each configuration bombConfigs('docker') gives.
import { after } from 'node:test';
import { bombCases } from './bomb-cases.js';
import { dockerTargets } from './docker-target.js';
import { bombConfigs } from './untrusted.js';

const targets = dockerTargets();
after(() => targets.close());

for (const config of bombConfigs('docker')) bombCases(config, () => targets.target(config));
