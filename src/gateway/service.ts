/**
 * The gateway's use cases, grouped: runs (runs.ts) and, beside them, the templates and health that
 * every transport offers. The groups share one set of deps: the backend, the policy, observability
 * and the concurrency slots, so that a run and a session count against the same limits.
 */
import type { BackendHealth, SandboxBackend } from '../backends/types.js';
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
  slots: SlotOptions;
}

export class SandpitService {
  private readonly deps: GatewayDeps;
  readonly runs: RunUseCases;

  constructor(options: ServiceOptions) {
    this.deps = { ...options, slots: new Slots(options.slots) };
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

  /** Cancels every live run and waits for the backend to clean up. */
  async shutdown(): Promise<void> {
    await this.runs.cancelAll('the server is shutting down');
    await this.deps.backend.close();
  }
}
