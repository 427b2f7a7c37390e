// The resource bombs on the oci backend (runc and runsc driven directly), in each configuration bombConfigs('oci') gives.
import { after } from 'node:test';
import { bombCases } from './bomb-cases.js';
import { ociTargets } from './oci-target.js';
import { bombConfigs } from './untrusted.js';

const targets = ociTargets();
after(() => targets.close());

for (const config of bombConfigs('oci')) bombCases(config, () => targets.target(config));
