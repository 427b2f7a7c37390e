/**
 * What follows a status write that changed the phase: an Event on the run, metrics, and when the
 * run is finished, one audit record in the gateway's format. Run only after the write succeeded
 * (the write carries the resourceVersion, so each transition is reported once).
 */
import { isTerminal, type RunResult } from '../api/run.js';
import { ANNOTATION_PRINCIPAL } from '../api/v1alpha1/labels.js';
import type { SandboxRunStatus } from '../api/v1alpha1/sandboxrun.js';
import { auditRecord, writeAudit } from '../observability/audit.js';
import type { Logger } from '../observability/logger.js';
import type { EffectiveSpec } from '../policy/evaluate.js';
import { limitsView } from '../backends/result.js';
import type { RunRef } from './children.js';
import type { EventRecorder } from './events.js';
import type { OperatorMetrics } from './metrics.js';

export const BACKEND = 'kubernetes';

export interface Transition {
  run: RunRef;
  createdAt: string;
  annotations: Record<string, string> | undefined;
  before: SandboxRunStatus;
  after: SandboxRunStatus;
  effective: EffectiveSpec | undefined;
}

export interface ReportDeps {
  events: EventRecorder;
  metrics: OperatorMetrics;
  logger: Logger;
}

const seconds = (from: string, to: string | undefined): number =>
  Math.max(0, ((to ? Date.parse(to) : Date.now()) - Date.parse(from)) / 1000);

/** The shared run result a finished status describes (the audit record is built from it). Pure. */
export function toRunResult(t: Transition): RunResult {
  const s = t.after;
  const spec = t.effective;
  const started = s.startTime ?? t.createdAt;
  return {
    runId: `${t.run.namespace}/${t.run.name}`,
    phase: s.phase ?? 'Pending',
    ...(s.reason ? { reason: s.reason } : {}),
    ...(s.message ? { message: s.message } : {}),
    exitCode: s.exitCode ?? null,
    timedOut: s.phase === 'TimedOut',
    stdout: s.output?.tail ?? '',
    stderr: '',
    truncated: s.output?.truncated ?? false,
    stdoutBytes: s.output?.bytes ?? 0,
    stderrBytes: 0,
    binaryOutput: false,
    durationMs: Math.round(seconds(started, s.completionTime) * 1000),
    ...(spec?.template ? { template: spec.template } : {}),
    ...(spec ? { image: spec.image } : {}),
    ...(spec?.runtime ? { runtime: spec.runtime } : {}),
    backend: BACKEND,
    ...(spec ? { limits: limitsView(spec.limits) } : {}),
    createdAt: t.createdAt,
    ...(s.completionTime ? { finishedAt: s.completionTime } : {}),
  };
}

export async function reportTransition(deps: ReportDeps, t: Transition): Promise<void> {
  const { before, after, run } = t;
  if (before.phase === after.phase || !after.phase) return;
  const key = `${run.namespace}/${run.name}`;
  if (after.phase === 'Running') {
    deps.metrics.timeToRunning.observe(seconds(t.createdAt, after.startTime));
    await deps.events.normal(run, 'Started', after.message ?? 'the program is running');
    return;
  }
  if (!isTerminal(after.phase)) return;
  if (after.startTime && before.phase !== 'Running')
    deps.metrics.timeToRunning.observe(seconds(t.createdAt, after.startTime));
  deps.metrics.timeToFinish.observe({ phase: after.phase }, seconds(t.createdAt, after.completionTime));
  deps.metrics.runsFinished.inc({ backend: BACKEND, phase: after.phase, reason: after.reason ?? '' });
  const message = after.message ?? after.phase;
  if (after.phase === 'Succeeded') await deps.events.normal(run, 'Succeeded', message);
  else await deps.events.warning(run, after.phase, `${after.reason ?? after.phase}: ${message}`);
  deps.logger.info(
    { run: key, phase: after.phase, reason: after.reason, exitCode: after.exitCode },
    'Finished SandboxRun',
  );
  if (t.effective) {
    const principal = t.annotations?.[ANNOTATION_PRINCIPAL] ?? `namespace:${run.namespace}`;
    writeAudit(deps.logger, auditRecord(t.effective, toRunResult(t), principal, BACKEND));
  }
}
