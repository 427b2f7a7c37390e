// The Docker tier's resource limits against the oci backend (runc): memory, processes, disk, CPU.
import { makeOciBackend } from '../../support/oci.js';
import { limitCases } from '../docker/limit-cases.js';

limitCases(makeOciBackend);
