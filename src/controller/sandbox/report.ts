/**
 * What follows a status write that changed a Sandbox's phase: an Event on it (Normal for Ready,
 * Expired and Deleted, Warning for Failed), the operator's session metrics and a log line. Run only
 * after the write succeeded (it carries the resourceVersion, so each transition is reported once).
 */
import { isSessionEnded } from '../../api/session.js';
import type { SandboxStatus } from '../../api/v1alpha1/sandbox.js';
import type { Logger } from '../../observability/logger.js';
import type { ObjectRef } from '../children.js';
import type { EventRecorder } from '../events.js';
import type { OperatorMetrics } from '../metrics.js';

export interface SandboxTransition {
  sandbox: ObjectRef;
  createdAt: string;
  before: SandboxStatus;
  after: SandboxStatus;
}

export interface SandboxReportDeps {
  events: EventRecorder;
  metrics: OperatorMetrics;
  logger: Logger;
}

const seconds = (from: string, to: string | undefined): number =>
  Math.max(0, ((to ? Date.parse(to) : Date.now()) - Date.parse(from)) / 1000);

export function reportSandbox(deps: SandboxReportDeps, t: SandboxTransition): void {
  const { before, after, sandbox } = t;
  if (before.phase === after.phase || !after.phase) return;
  const message = after.message ?? after.phase;
  if (after.phase === 'Ready') {
    deps.metrics.sandboxReady.observe(seconds(t.createdAt, after.readyTime));
    deps.events.normal(sandbox, 'Ready', message);
    return;
  }
  if (!isSessionEnded(after.phase)) return;
  deps.metrics.sandboxesEnded.inc({ phase: after.phase, reason: after.reason ?? '' });
  const detail = `${after.reason ?? after.phase}: ${message}`;
  if (after.phase === 'Failed') deps.events.warning(sandbox, 'Failed', detail);
  else deps.events.normal(sandbox, after.phase, detail);
  deps.logger.info(
    { sandbox: `${sandbox.namespace}/${sandbox.name}`, phase: after.phase, reason: after.reason },
    'Sandbox ended',
  );
}
