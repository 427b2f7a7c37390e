import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gatewayError, type CallContext } from '../../../../src/backends/kubernetes/errors.js';
import { KubeApiError } from '../../../../src/kube/errors.js';
import type { AppError } from '../../../../src/shared/errors.js';

const ctx: CallContext = {
  verb: 'create',
  resource: 'sandboxruns',
  namespace: 'agents',
  server: 'https://127.0.0.1:6443',
};
const apiError = (status: number, message: string, reason = ''): KubeApiError =>
  new KubeApiError(`create SandboxRuns: ${message}`, { code: 'BACKEND_ERROR', status, reason });

/** The apiserver's 403 Forbidden with `message`, mapped: it must be the busy error (retryable). */
function busyFor(message: string): AppError {
  const e = gatewayError(apiError(403, message, 'Forbidden'), ctx);
  assert.equal(e.code, 'BUSY');
  assert.equal(e.retryable, true);
  return e;
}

describe('gatewayError: each refusal says what to fix', () => {
  test('apiserver unreachable: ENGINE_UNAVAILABLE naming the server, with a hint', () => {
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
    const e = gatewayError(cause, ctx);
    assert.equal(e.code, 'ENGINE_UNAVAILABLE');
    assert.match(e.message, /https:\/\/127\.0\.0\.1:6443 is not answering.*ECONNREFUSED/);
    assert.match(e.hint ?? '', /kubernetes\.gateway\.kubeconfig/);
  });

  test('CRD missing: names `kubectl apply -f crds/`', () => {
    const e = gatewayError(
      apiError(404, 'the server could not find the requested resource', 'NotFound'),
      ctx,
    );
    assert.equal(e.code, 'ENGINE_UNAVAILABLE');
    assert.match(e.message, /sandboxruns\.sandpit\.dev.*not installed/);
    assert.match(e.hint ?? '', /kubectl apply -f crds\//);
  });

  test('namespace missing: CONFIG_INVALID naming it and the setting', () => {
    const e = gatewayError(apiError(404, 'namespaces "agents" not found', 'NotFound'), ctx);
    assert.equal(e.code, 'CONFIG_INVALID');
    assert.match(e.message, /namespace agents does not exist/);
    assert.match(e.hint ?? '', /kubernetes\.gateway\.namespace/);
  });

  test('an object that is gone: NOT_FOUND (not a missing CRD)', () => {
    const e = gatewayError(apiError(404, 'sandboxruns.sandpit.dev "run-1" not found', 'NotFound'), {
      ...ctx,
      verb: 'get',
    });
    assert.equal(e.code, 'NOT_FOUND');
  });

  test('Forbidden: FORBIDDEN naming the verb, the resource and the RBAC to apply', () => {
    const e = gatewayError(
      apiError(
        403,
        'sandboxruns.sandpit.dev is forbidden: User "sandpit-gateway" cannot create resource "sandboxruns"',
        'Forbidden',
      ),
      ctx,
    );
    assert.equal(e.code, 'FORBIDDEN');
    assert.match(e.message, /may not create sandboxruns in namespace agents/);
    assert.match(e.hint ?? '', /deploy\/gateway-rbac\.yaml/);
    assert.match(e.hint ?? '', /ClusterRole sandpit-gateway .*namespace agents/);
  });

  test('Forbidden on the Lease names the health role', () => {
    const e = gatewayError(apiError(403, 'leases is forbidden', 'Forbidden'), {
      ...ctx,
      verb: 'get',
      resource: 'leases',
      namespace: 'sandpit-system',
    });
    assert.match(e.hint ?? '', /sandpit-gateway-operator-health .*sandpit-system/);
  });

  test('a quota: the busy error (retryable), naming the quota, its namespace and its counts', () => {
    const e = busyFor(
      'sandboxruns.sandpit.dev "run-1" is forbidden: exceeded quota: tenant-runs, requested: count/sandboxruns.sandpit.dev=1, used: count/sandboxruns.sandpit.dev=2, limited: count/sandboxruns.sandpit.dev=2',
    );
    assert.equal(
      e.message,
      'busy, retry later: ResourceQuota tenant-runs in namespace agents allows no more runs (used count/sandboxruns.sandpit.dev=2, limited count/sandboxruns.sandpit.dev=2)',
    );
    assert.match(e.hint ?? '', /raise ResourceQuota tenant-runs/);
    const session = gatewayError(
      apiError(403, 'exceeded quota: q1, requested: x=1, used: x=1, limited: x=1'),
      {
        ...ctx,
        resource: 'sandboxes',
      },
    );
    assert.match(
      session.message,
      /^busy, retry later: ResourceQuota q1 in namespace agents allows no more sessions/,
    );
    const bare = gatewayError(apiError(403, 'exceeded quota: q2'), ctx);
    assert.equal(bare.message, 'busy, retry later: ResourceQuota q2 in namespace agents allows no more runs');
  });

  test('a quota not counted yet: the busy error (retryable), naming the quota and the resync that counts it', () => {
    const e = busyFor(
      'sandboxruns.sandpit.dev "run-1" is forbidden: status unknown for quota: tenant-runs, resources: count/sandboxruns.sandpit.dev',
    );
    assert.equal(
      e.message,
      'busy, retry later: ResourceQuota tenant-runs in namespace agents has not counted its count/sandboxruns.sandpit.dev yet',
    );
    assert.match(e.hint ?? '', /--resource-quota-sync-period/);
    assert.doesNotMatch(e.hint ?? '', /gateway-rbac/);
  });

  test('401, 413, 500 and others', () => {
    assert.equal(gatewayError(apiError(401, 'Unauthorized'), ctx).code, 'UNAUTHORIZED');
    assert.equal(gatewayError(apiError(413, 'Request entity too large'), ctx).code, 'TOO_LARGE');
    assert.equal(
      gatewayError(
        new KubeApiError('x: etcd timeout', { code: 'ENGINE_UNAVAILABLE', status: 500, reason: '' }),
        ctx,
      ).code,
      'ENGINE_UNAVAILABLE',
    );
    assert.equal(gatewayError(apiError(409, 'already exists', 'AlreadyExists'), ctx).code, 'BACKEND_ERROR');
  });

  test('a watch failure (client-node: an Error with statusCode) maps the same way', () => {
    const e = gatewayError(Object.assign(new Error('Forbidden'), { statusCode: 403 }), {
      ...ctx,
      verb: 'watch',
    });
    assert.equal(e.code, 'FORBIDDEN');
    assert.match(e.message, /may not watch sandboxruns/);
  });
});
