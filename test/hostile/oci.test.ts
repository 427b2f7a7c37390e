// The escape catalogue on the oci backend, in each configuration configs('oci') gives.
import { after } from 'node:test';
import { escapeCases } from './escape-cases.js';
import { ociTargets } from './oci-target.js';
import { configs } from './untrusted.js';

const targets = ociTargets();
after(() => targets.close());

for (const config of configs('oci')) escapeCases(config, () => targets.target(config));
