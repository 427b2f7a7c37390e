// The Docker tier's core properties, from inside the sandbox, against the oci backend under runc.
import { makeOciBackend } from '../../support/oci.js';
import { coreCases } from '../docker/core-cases.js';

coreCases(undefined, makeOciBackend);
