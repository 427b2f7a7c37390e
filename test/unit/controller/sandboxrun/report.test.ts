import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { buildEvent, type EventRecorder } from '../../../../src/controller/events.js';
import { createOperatorMetrics } from '../../../../src/controller/metrics.js';
import {
  auditOutcome,
  reportTransition,
  type Transition,
} from '../../../../src/controller/sandboxrun/report.js';
import { buildRunAudit } from '../../../../src/observability/audit.js';
import { createAuditTrail } from '../../../../src/observability/audit-trail.js';
import type { Logger } from '../../../../src/observability/logger.js';
import { effective, RUN } from '../fixtures.js';

const spec = effective();
const finished: Transition = {
  run: RUN,
  createdAt: '2026-01-01T00:00:00Z',
  annotations: { 'sandpit.dev/principal': 'ci-bot' },
  before: { phase: 'Running', startTime: '2026-01-01T00:00:02Z' },
  after: {
    phase: 'Failed',
    reason: 'Error',
    message: 'the program exited with code 3',
    exitCode: 3,
    startTime: '2026-01-01T00:00:02Z',
    completionTime: '2026-01-01T00:00:03.500Z',
    output: { tail: 'boom\n', truncated: false, bytes: 5 },
  },
  effective: spec,
};

function capture(): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _e, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return {
    logger: pino({ level: 'info' }, stream),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

function recorder(): EventRecorder & { seen: string[] } {
  const seen: string[] = [];
  return {
    seen,
    normal: (_r, reason, message) => void seen.push(`Normal ${reason}: ${message}`),
    warning: (_r, reason, message) => void seen.push(`Warning ${reason}: ${message}`),
  };
}

describe('reporting a finished run', () => {
  test('auditOutcome: how the status says the run ended', () => {
    assert.deepEqual(auditOutcome(finished), {
      runId: 'agents/hello',
      phase: 'Failed',
      reason: 'Error',
      exitCode: 3,
      durationMs: 1500,
      stdoutBytes: 5,
      stderrBytes: 0,
    });
  });

  test('durationMs is the runner’s own measure when the exit report has it (pod times are whole seconds)', () => {
    const oneSecond: Transition = {
      ...finished,
      after: { ...finished.after, startTime: '2026-01-01T00:00:02Z', completionTime: '2026-01-01T00:00:02Z' },
    };
    assert.equal(auditOutcome(oneSecond).durationMs, 0, 'from the pod timestamps alone');
    const measured = { ...oneSecond, runnerDurationMs: 1012 };
    assert.equal(auditOutcome(measured).durationMs, 1012);
    const { logger, lines } = capture();
    reportTransition(
      { events: recorder(), metrics: createOperatorMetrics(), logger, audit: createAuditTrail({ logger }) },
      measured,
    );
    const audit = lines().find((l) => l.msg === 'audit')?.audit as { durationMs?: number } | undefined;
    assert.equal(audit?.durationMs, 1012, 'the audit record carries it');
  });

  test('one audit record in the gateway’s format, one Warning event, metrics', async () => {
    const { logger, lines } = capture();
    const events = recorder();
    const metrics = createOperatorMetrics();
    reportTransition({ events, metrics, logger, audit: createAuditTrail({ logger }) }, finished);
    const audits = lines().filter((l) => l.msg === 'audit');
    assert.equal(audits.length, 1);
    const expected = buildRunAudit({
      spec,
      outcome: auditOutcome(finished),
      principal: 'ci-bot',
      backend: 'kubernetes',
      time: new Date('2026-01-01T00:00:03.500Z'),
    });
    // The log line carries the record without its preview (logs never carry code).
    const { preview: _preview, ...command } = expected.command;
    assert.deepEqual(audits[0]!.audit, JSON.parse(JSON.stringify({ ...expected, command })));
    assert.equal(expected.time, '2026-01-01T00:00:03.500Z', 'stamped with the completion time');
    assert.deepEqual(events.seen, ['Warning Failed: Error: the program exited with code 3']);
    const text = await metrics.registry.metrics();
    assert.match(
      text,
      /sandpit_runs_total\{backend="kubernetes",phase="Failed",reason="Error",component="operator"\} 1/,
    );
    assert.match(text, /sandpit_operator_run_finish_seconds_count\{component="operator",phase="Failed"\} 1/);
  });

  test('no phase change: nothing reported', () => {
    const { logger, lines } = capture();
    const events = recorder();
    reportTransition(
      { events, metrics: createOperatorMetrics(), logger, audit: createAuditTrail({ logger }) },
      { ...finished, before: finished.after },
    );
    assert.deepEqual(events.seen, []);
    assert.equal(lines().filter((l) => l.msg === 'audit').length, 0);
  });
});

describe('buildEvent', () => {
  test('an Event on the SandboxRun, named after it, with micro-second eventTime', () => {
    const e = buildEvent(
      RUN,
      { type: 'Normal', reason: 'CreatedPod', message: 'Created pod x' },
      new Date(Date.UTC(2026, 0, 1)),
      'op-1',
    );
    assert.match(e.metadata.name ?? '', /^hello\.[0-9a-f]+$/);
    assert.deepEqual(e.involvedObject, {
      apiVersion: 'sandpit.dev/v1alpha1',
      kind: 'SandboxRun',
      name: 'hello',
      namespace: 'agents',
      uid: RUN.uid,
    });
    assert.equal(e.eventTime, '2026-01-01T00:00:00.000000Z');
    assert.equal(e.reportingInstance, 'op-1');
  });
});
