import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SandboxSchema } from '../../../../../src/api/v1alpha1/sandbox.js';
import { principalLabelValue } from '../../../../../src/backends/kubernetes/build-sandbox-run.js';
import { buildSandbox } from '../../../../../src/backends/kubernetes/sessions/build-sandbox.js';
import { listedSession } from '../../../../../src/backends/kubernetes/sessions/listed-session.js';
import { factsOf } from '../../../../../src/policy/session.js';
import { sessionSpec } from '../../../../support/sessions.js';

const options = {
  sessionId: 'ses-0123456789abcdef',
  namespace: 'tenant-a',
  principal: 'alice',
  ttlSecondsAfterFinished: 300,
  pendingTimeoutSeconds: 60,
  createdAt: Date.parse('2026-01-02T03:04:05.678Z'),
};

describe('buildSandbox', () => {
  const spec = sessionSpec({
    template: 'python',
    ttlSeconds: 900,
    idleTimeoutSeconds: 120,
    timeoutSeconds: 20,
    resources: { memory: '256Mi' },
    env: [{ name: 'A', value: '1' }],
    secrets: [{ name: 'TOKEN', value: 's3cret' }],
  });
  const sandbox = buildSandbox(spec, { ...options, labels: { team: 'x', 'sandpit.dev/managed-by': 'me' } });

  test('is a valid Sandbox named after the session, in the tenant namespace', () => {
    SandboxSchema.parse(sandbox);
    assert.equal(sandbox.metadata.name, options.sessionId);
    assert.equal(sandbox.metadata.namespace, 'tenant-a');
  });

  test('labels: gateway-made, the session, the hashed principal; system labels win; principal annotated', () => {
    assert.deepEqual(sandbox.metadata.labels, {
      team: 'x',
      'sandpit.dev/managed-by': 'sandpit-gateway',
      'sandpit.dev/session': options.sessionId,
      'sandpit.dev/principal': principalLabelValue('alice'),
    });
    assert.equal(sandbox.metadata.annotations?.['sandpit.dev/principal'], 'alice');
    assert.deepEqual(Object.keys(sandbox.metadata.annotations ?? {}).sort(), [
      'sandpit.dev/principal',
      'sandpit.dev/session-facts',
    ]);
  });

  test('the facts annotation lists back as the session was made: no value, no secret', () => {
    const listed = listedSession(
      { ...sandbox, status: { phase: 'Ready', reason: 'Created', lastActivity: '2026-01-02T03:05:00.000Z' } },
      'alice',
    );
    assert.ok(listed);
    assert.equal(listed.sessionId, options.sessionId);
    assert.deepEqual(listed.spec, factsOf(spec));
    assert.deepEqual(
      listed.envNames,
      spec.env.map((e) => e.name),
    );
    assert.ok(listed.envNames.includes('A'));
    assert.equal(listed.state, 'Ready');
    assert.equal(listed.createdAt, options.createdAt);
    assert.equal(listed.lastActivityAt, Date.parse('2026-01-02T03:05:00.000Z'));
    assert.equal(listed.endedAt, undefined);
    const ended = listedSession(
      {
        ...sandbox,
        status: { phase: 'Expired', reason: 'TTLExpired', finishedTime: '2026-01-02T04:00:00Z' },
      },
      'alice',
    );
    assert.equal(ended?.reason, 'TTLExpired');
    assert.equal(ended?.endedAt, Date.parse('2026-01-02T04:00:00Z'));
  });

  test('an extended session lists with the lifetime in its spec (the gateway patches spec.ttlSeconds only)', () => {
    const extended = { ...sandbox, spec: { ...sandbox.spec, ttlSeconds: 1800 } };
    assert.equal(listedSession(extended, 'alice')?.spec.ttlSeconds, 1800);
    const garbled = { ...sandbox, spec: { ...sandbox.spec, ttlSeconds: 'soon' as unknown as number } };
    assert.equal(listedSession(garbled, 'alice')?.spec.ttlSeconds, 900, 'else the facts');
  });

  test("another principal's Sandbox, or one whose facts do not parse, is not listed", () => {
    assert.equal(listedSession(sandbox, 'bob'), undefined);
    const forged = structuredClone(sandbox);
    forged.metadata.annotations!['sandpit.dev/session-facts'] = '{"v":1,"spec":{}}';
    assert.equal(listedSession(forged, 'alice'), undefined);
    forged.metadata.annotations!['sandpit.dev/session-facts'] = 'x'.repeat(100_000);
    assert.equal(listedSession(forged, 'alice'), undefined);
  });

  test('the spec is the effective decision with its lifetimes, and no secret', () => {
    const s = sandbox.spec;
    assert.equal(s.template, 'python');
    assert.equal(s.image, spec.image);
    assert.equal(s.ttlSeconds, 900);
    assert.equal(s.idleTimeoutSeconds, 120);
    assert.equal(s.timeoutSeconds, 20);
    assert.equal(s.ttlSecondsAfterFinished, 300);
    assert.equal(s.pendingTimeoutSeconds, 60);
    assert.equal(s.resources?.memory, '256Mi');
    assert.deepEqual(s.network, { egress: 'none' });
    assert.ok(s.env?.some((e) => e.name === 'A' && e.value === '1'));
    assert.ok(!JSON.stringify(sandbox).includes('s3cret'));
    assert.ok(!JSON.stringify(sandbox).includes('TOKEN'));
  });

  test('pure: the same input gives the same object', () => {
    assert.deepEqual(buildSandbox(spec, options), buildSandbox(spec, options));
  });
});
