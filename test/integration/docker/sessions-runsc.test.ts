// Sessions under gVisor (Debian's runsc, ptrace platform): the same properties.
import { sessionCases } from './session-cases.js';

sessionCases('runsc');
