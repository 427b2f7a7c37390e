// Output files on the Docker backend: cold, or warm with SANDPIT_TEST_POOL=on (test/run.sh docker-pools).
import { makeBackend, POOLS_ON } from '../../support/docker.js';
import { outputCases } from './output-cases.js';

outputCases(makeBackend, POOLS_ON ? 'warm' : 'cold');
