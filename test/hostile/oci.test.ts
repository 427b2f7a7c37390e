// The escape catalogue on the oci backend, under runc and under gVisor (runsc).
import { makeOciBackend } from '../support/oci.js';
import { escapeCases } from './escape-cases.js';

escapeCases('oci, runc', makeOciBackend);
escapeCases('oci, runsc', makeOciBackend, 'runsc');
