// The resource bombs on the oci backend (runc and runsc driven directly), in each configuration configs('oci') gives.
import { after } from 'node:test';
import { bombCases } from './bomb-cases.js';
import { ociTargets } from './oci-target.js';
import { configs } from './untrusted.js';

const targets = ociTargets();
after(() => targets.close());

for (const config of configs('oci')) bombCases(config, () => targets.target(config));
