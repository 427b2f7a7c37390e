import { makeBackend } from '../../support/docker.js';
import { limitCases } from './limit-cases.js';

limitCases(makeBackend);
