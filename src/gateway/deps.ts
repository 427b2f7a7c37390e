/**
 * What every group of use cases shares: the backend, the policy, observability, the audit trail
 * (whose gate each use case that starts something calls first), the concurrency slots, the
 * per-principal rate limits and the journal of runs under way.
 */
import type { SandboxBackend } from '../backends/types.js';
import type { AuditTrail } from '../observability/audit-trail.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Policy } from '../policy/policy.js';
import type { RateLimits } from './rate-limits.js';
import type { RunJournal } from './run-journal.js';
import type { Slots } from './slots.js';

export interface GatewayDeps {
  backend: SandboxBackend;
  policy: Policy;
  logger: Logger;
  metrics: Metrics;
  audit: AuditTrail;
  slots: Slots;
  /** Per-principal runs and output bytes a minute, in this process. */
  rates: RateLimits;
  /** The runs under way, remembered so that one lost with this process is still audited. */
  runJournal: RunJournal;
}
