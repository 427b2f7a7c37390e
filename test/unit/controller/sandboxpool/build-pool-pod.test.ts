import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ObjectRef } from '../../../../src/controller/children.js';
import { buildPoolPod, type PoolShape } from '../../../../src/controller/sandboxpool/build-pool-pod.js';
import { evaluatePool } from '../../../../src/controller/sandboxpool/evaluate-pool.js';
import { createPolicy } from '../../../../src/policy/policy.js';
import { SETTINGS } from '../fixtures.js';

const POOL: ObjectRef = {
  apiVersion: 'sandpit.dev/v1alpha1',
  kind: 'SandboxPool',
  name: 'python-warm',
  namespace: 'agents',
  uid: '5e6f7a8b-1111-2222-3333-444455556666',
};
const policy = createPolicy();

function shape(spec: Record<string, unknown>): PoolShape {
  const v = evaluatePool(spec, policy);
  if (!v.allowed) throw new Error(v.message);
  return {
    mode: v.spec.mode,
    maxIdleSeconds: v.spec.maxIdleSeconds,
    effective: v.effective,
    shapeLabel: v.shapeLabel,
  };
}

const options = { settings: SETTINGS, ceilings: policy, requireNoNetwork: false };

describe('buildPoolPod', () => {
  const run = shape({ template: 'python', resources: { memory: '256Mi' }, maxIdleSeconds: 600 });
  const pod = buildPoolPod(POOL, run, options);
  const c = pod.spec?.containers[0];

  test('mode run: the runner in pool mode on a stdin that closes with its one attach', () => {
    assert.deepEqual(c?.command, [
      '/usr/local/bin/sandpit-runner',
      '--pool',
      '--preload',
      '--env',
      'PYTHONUNBUFFERED=1',
      '--env',
      'PYTHONDONTWRITEBYTECODE=1',
    ]);
    assert.equal(c?.stdin, true);
    assert.equal(c?.stdinOnce, true);
    assert.equal(c?.tty, false);
    assert.equal(c?.env, undefined);
  });

  test('labels, generateName and the pool as controller', () => {
    assert.equal(pod.metadata?.generateName, 'python-warm-');
    assert.equal(pod.metadata?.name, undefined);
    assert.equal(pod.metadata?.namespace, 'agents');
    assert.deepEqual(pod.metadata?.labels, {
      'sandpit.dev/managed-by': 'sandpit-operator',
      'sandpit.dev/component': 'sandbox',
      'sandpit.dev/pool': 'python-warm',
      'sandpit.dev/pool-uid': POOL.uid,
      'sandpit.dev/pool-pod': 'idle',
      'sandpit.dev/pool-shape': run.shapeLabel,
    });
    assert.deepEqual(pod.metadata?.ownerReferences, [
      { apiVersion: POOL.apiVersion, kind: 'SandboxPool', name: POOL.name, uid: POOL.uid, controller: true },
    ]);
  });

  test('a long pool name is cut for generateName and hashed for its label', () => {
    const long = buildPoolPod({ ...POOL, name: `${'p'.repeat(80)}` }, run, options);
    assert.equal(long.metadata?.generateName, `${'p'.repeat(57)}-`);
    assert.match(long.metadata?.labels?.['sandpit.dev/pool'] ?? '', /^h-[0-9a-f]{20}$/);
  });

  test('its deadline: idle time + the run timeout ceiling + the start grace', () => {
    assert.equal(
      pod.spec?.activeDeadlineSeconds,
      600 + policy.ceilings.timeoutSeconds + SETTINGS.startGraceSeconds,
    );
  });

  test('the hardened sandbox pod of the effective shape', () => {
    assert.equal(pod.spec?.automountServiceAccountToken, false);
    assert.equal(pod.spec?.enableServiceLinks, false);
    assert.equal(pod.spec?.restartPolicy, 'Never');
    assert.equal(pod.spec?.dnsPolicy, 'None');
    assert.equal(pod.spec?.securityContext?.runAsNonRoot, true);
    assert.equal(c?.securityContext?.readOnlyRootFilesystem, true);
    assert.equal(c?.securityContext?.allowPrivilegeEscalation, false);
    assert.deepEqual(c?.securityContext?.capabilities, { drop: ['ALL'] });
    assert.equal(c?.image, run.effective.image);
    assert.equal(c?.resources?.limits?.memory, '256Mi');
  });

  test('mode session: the session runner waiting through its idle life and a session’s, stdin kept open, the template’s env; the TTL ceiling in its deadline', () => {
    const session = shape({ template: 'python', mode: 'session', maxIdleSeconds: 900 });
    const p = buildPoolPod(POOL, session, options);
    const sc = p.spec?.containers[0];
    const openWithin = String(900 + policy.sessions.maxTtlSeconds);
    assert.deepEqual(sc?.command, [
      '/usr/local/bin/sandpit-runner',
      '--session',
      '--open-within',
      openWithin,
    ]);
    assert.equal(sc?.stdin, true);
    assert.equal(sc?.stdinOnce, false);
    // What kubectl exec sees, as in a Sandbox's own pod: only a Sandbox with these variables is served.
    assert.deepEqual(sc?.env, session.effective.env);
    assert.ok(sc?.env?.some((e) => e.name === 'PYTHONUNBUFFERED'));
    assert.equal(
      p.spec?.activeDeadlineSeconds,
      900 + policy.sessions.maxTtlSeconds + SETTINGS.startGraceSeconds,
    );
    const checked = buildPoolPod(POOL, session, { ...options, requireNoNetwork: true });
    assert.deepEqual(checked.spec?.containers[0]?.command?.slice(-1), ['--no-network']);
  });
});
