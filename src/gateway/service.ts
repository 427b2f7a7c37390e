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
import type { HistoryOptions } from './run-store.js';
import { RunFileUseCases } from './run-files.js';
import { RunUseCases } from './runs.js';
import type { SessionJournal } from './session-journal.js';
import { NO_RUN_JOURNAL, type RunJournal } from './run-journal.js';
import { SessionUseCases, type SessionCaps } from './sessions.js';
import { RateLimits, type RateLimitOptions } from './rate-limits.js';
import { Slots, type SlotOptions } from './slots.js';
import { templatesFor, type TemplateInfo } from './templates.js';

/** How long one answer of the backend's health serves every caller. */
const HEALTH_TTL_MS = 1000;

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
  /** Per-principal rate limits (off when absent). */
  rates?: RateLimitOptions;
  /** How much of finished runs' results stays in memory (RunStore). */
  history?: Partial<HistoryOptions>;
  /** Caps on live sessions and what their logs keep. */
  sessions?: Partial<SessionCaps>;
  /** Where live sessions are remembered across a restart (a server with an instance id). */
  journal?: SessionJournal | undefined;
  /**
   * Where runs under way are remembered, so that one lost with this process is audited by the
   * next (backends whose sandboxes end with their process: Docker, oci). None by default.
   */
  runJournal?: RunJournal | undefined;
}

export interface ShutdownOptions {
  /**
   * End every live session (a stdio server: nobody could reach them again). Otherwise they stay,
   * detached, for the next start of this server to adopt.
   */
  endSessions?: boolean;
}

export class SandpitService {
  private readonly deps: GatewayDeps;
  readonly runs: RunUseCases;
  /** The files runs returned (outputs). */
  readonly runFiles: RunFileUseCases;
  readonly sessions: SessionUseCases;
  private backendHealth: { at: number; health: Promise<BackendHealth> } | undefined;

  constructor(options: ServiceOptions) {
    const { history, sessions, journal, rates, runJournal, ...deps } = options;
    const audit = deps.audit ?? createAuditTrail({ logger: deps.logger, metrics: deps.metrics.audit });
    this.deps = {
      ...deps,
      audit,
      slots: new Slots(deps.slots),
      rates: new RateLimits(rates),
      runJournal: runJournal ?? NO_RUN_JOURNAL,
    };
    this.runs = new RunUseCases(this.deps, history);
    this.runFiles = new RunFileUseCases(this.runs, deps.backend.files);
    this.sessions = new SessionUseCases(this.deps, sessions, journal);
  }

  get policy(): Policy {
    return this.deps.policy;
  }

  /** The templates this principal may use, with their images and default limits. */
  templates(principal: Principal): TemplateInfo[] {
    return templatesFor(this.deps.policy, principal);
  }

  /**
   * The backend's health, asked at most once a second however many callers ask (an unauthenticated
   * /health flood must not become an engine flood), with the run counts of now.
   */
  async health(): Promise<BackendHealth & { running: number; queued: number; sessions: number }> {
    const now = Date.now();
    if (!this.backendHealth || now - this.backendHealth.at >= HEALTH_TTL_MS) {
      this.backendHealth = { at: now, health: this.deps.backend.health() };
    }
    const health = await this.backendHealth.health;
    return { ...health, ...this.deps.slots.stats, sessions: this.sessions.count };
  }

  /**
   * Cancels every live run, or releases one no call waits on where it can outlive this process
   * (RunUseCases.shutdown), ends the sessions when asked, waits for the backend to clean up, and
   * writes the last audit records.
   */
  async shutdown(options: ShutdownOptions = {}): Promise<void> {
    await Promise.all([
      this.runs.shutdown('the server is shutting down'),
      options.endSessions ? this.sessions.endAll('the server shut down') : undefined,
    ]);
    await this.deps.backend.close();
    await this.deps.audit.close();
  }
}
