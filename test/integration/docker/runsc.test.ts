// gVisor (Debian's runsc, ptrace platform, --network=none) must keep the same properties.
import { coreCases } from './core-cases.js';

coreCases('runsc');
