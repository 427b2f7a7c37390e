import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SandboxSchema } from '../../../../../src/api/v1alpha1/sandbox.js';
import { principalLabelValue } from '../../../../../src/backends/kubernetes/build-sandbox-run.js';
import { buildSandbox } from '../../../../../src/backends/kubernetes/sessions/build-sandbox.js';
import { sessionSpec } from '../../../../support/sessions.js';

const options = {
  sessionId: 'ses-0123456789abcdef',
  namespace: 'tenant-a',
  principal: 'alice',
  ttlSecondsAfterFinished: 300,
  pendingTimeoutSeconds: 60,
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
    assert.deepEqual(sandbox.metadata.annotations, { 'sandpit.dev/principal': 'alice' });
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
