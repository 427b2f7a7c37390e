/**
 * What follows a status write that changed the phase: an Event on the run, metrics, and when the
 * run is finished, one audit record in the gateway's format. Run only after the write succeeded
 * (the write carries the resourceVersion, so each transition is reported once).
 */
import { isTerminal } from '../../api/run.js';
import { ANNOTATION_PRINCIPAL } from '../../api/v1alpha1/labels.js';
import type { SandboxRunStatus } from '../../api/v1alpha1/sandboxrun.js';
import { buildRunAudit, type AuditOutcome } from '../../observability/audit.js';
import type { AuditTrail } from '../../observability/audit-trail.js';
import type { Logger } from '../../observability/logger.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { ObjectRef } from '../children.js';
import type { EventRecorder } from '../events.js';
import type { OperatorMetrics } from '../metrics.js';

export const BACKEND = 'kubernetes';

export interface Transition {
  run: ObjectRef;
  createdAt: string;
  annotations: Record<string, string> | undefined;
  before: SandboxRunStatus;
  after: SandboxRunStatus;
  effective: EffectiveSpec | undefined;
  /**
   * The program's run time as its runner measured it (the exit report). Pod timestamps are whole
   * seconds, so a one-second run would otherwise read as 0 ms.
   */
  runnerDurationMs?: number | undefined;
}

export interface ReportDeps {
  events: EventRecorder;
  metrics: OperatorMetrics;
  logger: Logger;
  audit: Pick<AuditTrail, 'record'>;
}

const seconds = (from: string, to: string | undefined): number =>
  Math.max(0, ((to ? Date.parse(to) : Date.now()) - Date.parse(from)) / 1000);

/** How a finished status says the run ended, as its audit record carries it. Pure. */
export function auditOutcome(t: Transition): AuditOutcome {
  const s = t.after;
  return {
    runId: `${t.run.namespace}/${t.run.name}`,
    phase: s.phase ?? 'Pending',
    reason: s.reason,
    exitCode: s.exitCode ?? null,
    durationMs:
      t.runnerDurationMs ?? Math.round(seconds(s.startTime ?? t.createdAt, s.completionTime) * 1000),
    // The pod log interleaves both streams (Kubernetes < 1.32): all of it counts as stdout.
    stdoutBytes: s.output?.bytes ?? 0,
    stderrBytes: 0,
  };
}

/** What a run's start is reported by: its time to running, and its `Started` Event. */
export function reportStart(
  deps: ReportDeps,
  t: Pick<Transition, 'run' | 'createdAt' | 'after'>,
  parts: { metric: boolean; event: boolean },
): void {
  if (parts.metric) deps.metrics.timeToRunning.observe(seconds(t.createdAt, t.after.startTime));
  if (parts.event) deps.events.normal(t.run, 'Started', t.after.message ?? 'the program is running');
}

export function reportTransition(deps: ReportDeps, t: Transition): void {
  const { before, after } = t;
  if (before.phase === after.phase || !after.phase) return;
  if (after.phase === 'Running') return reportStart(deps, t, { metric: true, event: true });
  if (isTerminal(after.phase)) reportFinished(deps, t, after.phase);
}

/** A run that reached `phase`: metrics, its Event, a log line and its audit record. */
function reportFinished(deps: ReportDeps, t: Transition, phase: string): void {
  const { before, after, run } = t;
  if (after.startTime && before.phase !== 'Running')
    deps.metrics.timeToRunning.observe(seconds(t.createdAt, after.startTime));
  deps.metrics.timeToFinish.observe({ phase }, seconds(t.createdAt, after.completionTime));
  deps.metrics.runsFinished.inc({ backend: BACKEND, phase, reason: after.reason ?? '' });
  const message = after.message ?? phase;
  if (phase === 'Succeeded') deps.events.normal(run, 'Succeeded', message);
  else deps.events.warning(run, phase, `${after.reason ?? phase}: ${message}`);
  deps.logger.info(
    { run: `${run.namespace}/${run.name}`, phase, reason: after.reason, exitCode: after.exitCode },
    'Finished SandboxRun',
  );
  if (t.effective) {
    const principal = t.annotations?.[ANNOTATION_PRINCIPAL] ?? `namespace:${run.namespace}`;
    const time = new Date(after.completionTime ?? Date.now());
    deps.audit.record(
      buildRunAudit({ spec: t.effective, outcome: auditOutcome(t), principal, backend: BACKEND, time }),
    );
  }
}
