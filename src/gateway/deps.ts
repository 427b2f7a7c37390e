/** What every group of use cases shares: the backend, the policy, observability, and the concurrency slots. */
import type { SandboxBackend } from '../backends/types.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Policy } from '../policy/policy.js';
import type { Slots } from './slots.js';

export interface GatewayDeps {
  backend: SandboxBackend;
  policy: Policy;
  logger: Logger;
  metrics: Metrics;
  slots: Slots;
}
