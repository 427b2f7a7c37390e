// Sessions on the default runtime (runc), through the backend's session port on the real engine.
import { sessionCases } from './session-cases.js';

sessionCases();
