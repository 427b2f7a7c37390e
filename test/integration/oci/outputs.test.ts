// The Docker tier's output-file cases against the oci backend: kept on disk by the gateway's process.
import { makeOciBackend } from '../../support/oci.js';
import { outputCases } from '../docker/output-cases.js';

outputCases(makeOciBackend);
