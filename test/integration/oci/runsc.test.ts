// The same properties under gVisor (runsc --platform=ptrace --network=none --oci-seccomp), driven directly.
import { makeOciBackend } from '../../support/oci.js';
import { coreCases } from '../docker/core-cases.js';

coreCases('runsc', makeOciBackend);
