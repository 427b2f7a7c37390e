import assert from 'node:assert/strict';
import https from 'node:https';
import { test } from 'node:test';
import { KubeConfig, RequestContext } from '@kubernetes/client-node';
import { keptAlive } from '../../../src/kube/keep-alive.js';

function config(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', skipTLSVerify: false }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u', namespace: 'ns' }],
    currentContext: 'ctx',
  });
  return kc;
}

const context = (): RequestContext =>
  new RequestContext('https://127.0.0.1:6443/api/v1/pods', 'GET' as never);

test('keptAlive: every API call and every fetch (watch, log) shares one keep-alive agent', async () => {
  const kc = keptAlive(config());
  const [a, b] = [context(), context()];
  await kc.applySecurityAuthentication(a);
  await kc.applySecurityAuthentication(b);
  const agent = a.getAgent();
  assert.ok(agent instanceof https.Agent);
  assert.equal(b.getAgent(), agent, 'one agent for both calls');
  assert.equal((agent as https.Agent & { keepAlive: boolean }).keepAlive, true);
  const fetched = await kc.applyToFetchOptions({});
  assert.equal(fetched.agent, agent, 'watches and log reads use it too');
  // The credentials are the original's, sent per request.
  assert.equal(a.getHeaders().Authorization, 'Bearer secret-token');
  assert.equal(kc.getCurrentContext(), 'ctx');
  assert.equal(kc.getContextObject('ctx')?.namespace, 'ns');
});

test('without it, client-node makes a new agent for every call (why keptAlive exists)', async () => {
  const kc = config();
  const [a, b] = [context(), context()];
  await kc.applySecurityAuthentication(a);
  await kc.applySecurityAuthentication(b);
  assert.notEqual(a.getAgent(), b.getAgent());
});
