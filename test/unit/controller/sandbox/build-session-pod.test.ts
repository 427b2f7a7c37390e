import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SessionRequestSchema } from '../../../../src/api/session.js';
import { buildSessionPod } from '../../../../src/controller/sandbox/build-session-pod.js';
import { evaluateSandbox } from '../../../../src/controller/sandbox/evaluate-sandbox.js';
import { createPolicy } from '../../../../src/policy/policy.js';
import { evaluateSession } from '../../../../src/policy/session.js';
import { SANDBOX, SETTINGS } from '../fixtures.js';

const SBX = SANDBOX;

function session(input: Record<string, unknown>) {
  const r = evaluateSession(SessionRequestSchema.parse(input), createPolicy());
  if (!r.ok) throw new Error(JSON.stringify(r.violations));
  return r.spec;
}

describe('buildSessionPod', () => {
  const spec = session({ template: 'python', ttlSeconds: 900, env: [{ name: 'MODE', value: 'x' }] });
  const CEILING = 7200;
  const options = { requireNoNetwork: false, maxTtlSeconds: CEILING };
  const pod = buildSessionPod(SBX, spec, SETTINGS, options);
  const c = pod.spec?.containers[0];

  test('the session runner waits for an open, on an attachable stdin', () => {
    assert.deepEqual(c?.command, ['/usr/local/bin/sandpit-runner', '--session', '--open-within', '7200']);
    assert.equal(c?.stdin, true);
    assert.equal(c?.stdinOnce, false);
    assert.equal(c?.tty, false);
  });

  test('the pod carries the TTL ceiling, not the TTL: an extension never meets an old deadline', () => {
    assert.equal(pod.spec?.activeDeadlineSeconds, CEILING + SETTINGS.startGraceSeconds);
    const shorter = buildSessionPod(SBX, session({ template: 'python', ttlSeconds: 60 }), SETTINGS, options);
    assert.equal(shorter.spec?.activeDeadlineSeconds, pod.spec?.activeDeadlineSeconds, 'whatever the TTL');
    assert.deepEqual(shorter.spec?.containers[0]?.command, c?.command);
  });

  test('the run pod hardening', () => {
    assert.equal(pod.spec?.automountServiceAccountToken, false);
    assert.equal(pod.spec?.restartPolicy, 'Never');
    assert.equal(pod.spec?.dnsPolicy, 'None');
    assert.equal(c?.securityContext?.readOnlyRootFilesystem, true);
    assert.equal(c?.securityContext?.runAsUser, 1000);
    assert.deepEqual(c?.securityContext?.capabilities, { drop: ['ALL'] });
    assert.equal(c?.image, spec.image);
    assert.deepEqual(c?.resources?.limits, { cpu: '1', memory: '512Mi' });
  });

  test('labels, owner and the environment kubectl exec sees (no secrets exist here)', () => {
    assert.equal(pod.metadata?.name, 'notebook-' + pod.metadata?.name?.slice(-5));
    assert.equal(pod.metadata?.labels?.['sandpit.dev/session'], 'notebook');
    assert.equal(pod.metadata?.labels?.['sandpit.dev/session-uid'], SBX.uid);
    assert.equal(pod.metadata?.labels?.['sandpit.dev/managed-by'], 'sandpit-operator');
    assert.deepEqual(pod.metadata?.ownerReferences, [
      {
        apiVersion: 'sandpit.dev/v1alpha1',
        kind: 'Sandbox',
        name: 'notebook',
        uid: SBX.uid,
        controller: true,
      },
    ]);
    assert.ok(c?.env?.some((e) => e.name === 'MODE' && e.value === 'x'));
  });

  test('on a cluster not declared to enforce NetworkPolicy the runner checks its interfaces first', () => {
    const checked = buildSessionPod(SBX, spec, SETTINGS, { ...options, requireNoNetwork: true });
    assert.deepEqual(checked.spec?.containers[0]?.command, [
      '/usr/local/bin/sandpit-runner',
      '--session',
      '--open-within',
      '7200',
      '--no-network',
    ]);
  });

  test('a long name is hashed in the label', () => {
    const long = buildSessionPod({ ...SBX, name: 'n'.repeat(80) }, spec, SETTINGS, options);
    assert.match(long.metadata?.labels?.['sandpit.dev/session'] ?? '', /^h-[0-9a-f]{20}$/);
  });
});

describe('evaluateSandbox', () => {
  const policy = createPolicy();
  const ENFORCED = { networkPolicyEnforced: true };
  test('an allowed spec: the session decision the gateway would take', () => {
    const v = evaluateSandbox(
      { template: 'python', runtimeClassName: 'runc', ttlSeconds: 120 },
      policy,
      ENFORCED,
    );
    assert.equal(v.allowed, true);
    if (v.allowed) {
      assert.equal(v.effective.ttlSeconds, 120);
      assert.equal(v.effective.runtime, 'runc');
      assert.equal(v.requireNoNetwork, false);
    }
  });
  test('a cluster not declared to enforce NetworkPolicy: allowed, as a run is, with the runner checking its interfaces', () => {
    const open = evaluateSandbox({ template: 'python' }, policy, { networkPolicyEnforced: false });
    assert.ok(open.allowed && open.requireNoNetwork, JSON.stringify(open));
  });
  test('refusals name the spec field', () => {
    const memory = evaluateSandbox({ template: 'python', resources: { memory: '64Gi' } }, policy, ENFORCED);
    assert.equal(memory.allowed, false);
    if (!memory.allowed) assert.match(memory.message, /^denied by policy: resources\.memory/);
    const runtime = evaluateSandbox({ template: 'python', runtimeClassName: 'kata' }, policy, ENFORCED);
    assert.ok(!runtime.allowed && /runtimeClassName/.test(runtime.message), JSON.stringify(runtime));
    const invalid = evaluateSandbox({ template: 'python', idleTimeoutSeconds: 5 }, policy, ENFORCED);
    assert.ok(!invalid.allowed && /^invalid spec: idleTimeoutSeconds/.test(invalid.message));
    const neither = evaluateSandbox({ ttlSeconds: 5 }, policy, ENFORCED);
    assert.ok(!neither.allowed && /template/.test(neither.message));
  });
});
