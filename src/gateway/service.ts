/**
 * The gateway's use cases, grouped: runs (runs.ts) and, beside them, the templates and health that
 * every transport offers. The groups share one set of deps: the backend, the policy, observability
 * and the concurrency slots, so that a run and a session count against the same limits.
 */
import type { BackendHealth, SandboxBackend } from '../backends/types.js';
import { createAuditTrail, type AuditTrail } from '../observability/audit-trail.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Policy } from '../policy/policy.js';
import type { GatewayDeps } from './deps.js';
import type { Principal } from './principal.js';
import { RunUseCases } from './runs.js';
import { Slots, type SlotOptions } from './slots.js';
import { templatesFor, type TemplateInfo } from './templates.js';

export interface ServiceOptions {
  backend: SandboxBackend;
  policy: Policy;
  logger: Logger;
  metrics: Metrics;
  /**
   * Opened by the caller; the service closes it on shutdown, after the last run's record. Without
   * one, records go to the logger only (the composition roots always pass the configured trail).
   */
  audit?: AuditTrail;
  slots: SlotOptions;
}

export class SandpitService {
  private readonly deps: GatewayDeps;
  readonly runs: RunUseCases;

  constructor(options: ServiceOptions) {
    const audit =
      options.audit ?? createAuditTrail({ logger: options.logger, metrics: options.metrics.audit });
    this.deps = { ...options, audit, slots: new Slots(options.slots) };
    this.runs = new RunUseCases(this.deps);
  }

  get policy(): Policy {
    return this.deps.policy;
  }

  /** The templates this principal may use, with their images and default limits. */
  templates(principal: Principal): TemplateInfo[] {
    return templatesFor(this.deps.policy, principal);
  }

  async health(): Promise<BackendHealth & { running: number; queued: number }> {
    const health = await this.deps.backend.health();
    return { ...health, ...this.deps.slots.stats };
  }

  /** Cancels every live run, waits for the backend to clean up, and writes the last audit records. */
  async shutdown(): Promise<void> {
    await this.runs.cancelAll('the server is shutting down');
    await this.deps.backend.close();
    await this.deps.audit.close();
  }
}
