/**
 * The run use cases' audit gate: while the audit file cannot be written a run is refused with
 * AUDIT_UNAVAILABLE before any sandbox exists, and counted as refused. (/dev/full fails every write.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { createAuditTrail } from '../../../src/observability/audit-trail.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';
import { sessionRecord } from '../../support/audit.js';

test('an unwritable audit file refuses runs with AUDIT_UNAVAILABLE before the backend is asked', async () => {
  const backend: SandboxBackend = {
    name: 'docker',
    start: () => assert.fail('no run may reach the backend while the audit file fails'),
    health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'ok' }),
    close: () => Promise.resolve(),
  };
  const metrics = createMetrics();
  const audit = createAuditTrail({
    logger: silentLogger(),
    metrics: metrics.audit,
    file: { path: '/dev/full', maxBytes: 1024, maxFiles: 1, flushIntervalMs: 0, retryIntervalMs: 60_000 },
  });
  await audit.open();
  audit.record(sessionRecord());
  await audit.flush();
  const service = new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics,
    audit,
    slots: { maxConcurrent: 1, maxQueued: 0 },
  });
  await assert.rejects(
    service.runs.run({ template: 'python', code: 'print(1)' }, LOCAL_PRINCIPAL),
    (e: unknown) => e instanceof AppError && e.code === 'AUDIT_UNAVAILABLE' && /\/dev\/full/.test(e.message),
  );
  assert.match(
    await metrics.registry.metrics(),
    /sandpit_rejected_requests_total\{code="AUDIT_UNAVAILABLE",component="gateway"\} 1/,
  );
  // Bad input still gets its own error first: the gate guards what would run.
  await assert.rejects(
    service.runs.run({ template: 'nope', code: 'x' }, LOCAL_PRINCIPAL),
    (e: unknown) => e instanceof AppError && e.code === 'POLICY_DENIED',
  );
  await service.shutdown();
});
