// Whose a connection to `sandpit egress-proxy` is: the run's or session's credential and the source
// pod's address together, over the caches of pods, SandboxRuns and Sandboxes (the lookups the
// command builds).
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, test } from 'node:test';
import { toEntry } from '../../../src/api/egress.js';
import type { Phase } from '../../../src/api/run.js';
import type { SessionState } from '../../../src/api/session.js';
import { clusterLookups } from '../../../src/cmd/cluster-lookups.js';
import { createClusterTenants, sourceAddress } from '../../../src/egress/cluster-tenants.js';
import { egressCredential, type EgressOwnerKind } from '../../../src/egress/credential.js';
import type { Pod } from '../../../src/kube/objects.js';
import { createPolicy } from '../../../src/policy/policy.js';

const KEY = Buffer.alloc(32, 9);
const UID = '0b5a4c3e-1111-2222-3333-444455556666';
const OTHER = '0b5a4c3e-1111-2222-3333-000000000000';
const policy = createPolicy({ egress: { disabled: false, ceiling: ['pypi.org'].map(toEntry) } });

const SESSION = '7c1d2e3f-aaaa-bbbb-cccc-ddddeeeeffff';
const pod = (uid: string, ip: string, phase = 'Running', label = 'sandpit.dev/run-uid'): Pod => ({
  metadata: { name: `p-${uid}`, namespace: 'agents', labels: { [label]: uid } },
  status: { phase, podIP: ip },
});
const sessionPod = (uid: string, ip: string): Pod => pod(uid, ip, 'Running', 'sandpit.dev/session-uid');
const run = (uid: string, network: unknown, phase?: Phase) => ({
  metadata: {
    name: `r-${uid.slice(-4)}`,
    namespace: 'agents',
    uid,
    annotations: { 'sandpit.dev/principal': 'alice' },
  },
  spec: { template: 'python', code: 'print(1)', network },
  ...(phase ? { status: { phase } } : {}),
});
const sandbox = (uid: string, network: unknown, phase?: SessionState) => ({
  metadata: { name: 'notebook', namespace: 'agents', uid, annotations: { 'sandpit.dev/principal': 'bob' } },
  spec: { template: 'python', network },
  ...(phase ? { status: { phase } } : {}),
});
const ALLOW = { egress: 'allowlist', allow: [{ host: 'pypi.org' }] };

function request(
  uid: string | undefined,
  from: string,
  o: { password?: string; kind?: EgressOwnerKind } = {},
): IncomingMessage {
  const headers: Record<string, string> = {};
  if (uid) {
    const kind = o.kind ?? 'run';
    const pass = o.password ?? egressCredential(KEY, { kind, uid });
    headers['proxy-authorization'] = `Basic ${Buffer.from(`${kind}-${uid}:${pass}`).toString('base64')}`;
  }
  return { headers, socket: { remoteAddress: from } } as unknown as IncomingMessage;
}

function setup(runs = [run(UID, ALLOW), run(OTHER, { egress: 'none' })]) {
  const pods = [pod(UID, '10.244.0.7'), pod(OTHER, '10.244.0.8'), sessionPod(SESSION, '10.244.0.9')];
  const state = { pods, runs, sandboxes: [sandbox(SESSION, ALLOW)] };
  const tenants = createClusterTenants(
    KEY,
    clusterLookups(
      {
        pods: { list: () => state.pods },
        runs: { list: () => state.runs },
        sandboxes: { list: () => state.sandboxes },
      },
      policy,
    ),
  );
  return { tenants, state };
}

describe('createClusterTenants', () => {
  test("the run's credential from the run's pod: its tenant, with the evaluated allowlist and principal", () => {
    const { tenants } = setup();
    const r = tenants.tenantOf(request(UID, '::ffff:10.244.0.7'));
    assert.ok('tenant' in r);
    assert.deepEqual(r.tenant.subject, { runId: 'agents/r-6666' });
    assert.equal(r.tenant.principal, 'alice');
    assert.equal(r.tenant.network.egress, 'allowlist');
    assert.deepEqual(
      r.tenant.network.egress === 'allowlist' ? r.tenant.network.allow.map((e) => 'host' in e && e.host) : [],
      ['pypi.org'],
    );
    const again = tenants.tenantOf(request(UID, '10.244.0.7'));
    assert.ok('tenant' in again);
    assert.equal(again.tenant, r.tenant, 'usage is counted per run, across connections');
  });

  test('no credential, a wrong one, or the right one from another pod: 407', () => {
    const { tenants } = setup();
    for (const req of [
      request(undefined, '10.244.0.7'),
      request(UID, '10.244.0.7', { password: 'guess' }),
      request(UID, '10.244.0.8'),
      request(UID, '10.244.0.99'),
    ]) {
      const r = tenants.tenantOf(req);
      assert.ok('refused' in r);
      assert.equal(r.refused.status, 407);
      assert.equal(r.refused.reason, 'unauthorized');
    }
  });

  test('a run without an allowlist, finished, or gone: 403 no-egress', () => {
    const { tenants, state } = setup();
    const none = tenants.tenantOf(request(OTHER, '10.244.0.8'));
    assert.ok('refused' in none && none.refused.status === 403 && none.refused.reason === 'no-egress');
    state.runs = [run(UID, ALLOW, 'Succeeded')];
    const done = tenants.tenantOf(request(UID, '10.244.0.7'));
    assert.ok('refused' in done && done.refused.reason === 'no-egress');
  });

  test('a pod that is not Running owns no address', () => {
    const { tenants, state } = setup();
    state.pods = [pod(UID, '10.244.0.7', 'Pending')];
    const r = tenants.tenantOf(request(UID, '10.244.0.7'));
    assert.ok('refused' in r && r.refused.status === 407);
  });

  test('sweep forgets the usage of runs that are gone', () => {
    const { tenants, state } = setup();
    tenants.tenantOf(request(UID, '10.244.0.7'));
    assert.equal(tenants.size, 1);
    tenants.sweep();
    assert.equal(tenants.size, 1);
    state.runs = [];
    tenants.sweep();
    assert.equal(tenants.size, 0);
  });

  test("a session's credential from its pod: its tenant, the Sandbox's allowlist and principal", () => {
    const { tenants } = setup();
    const r = tenants.tenantOf(request(SESSION, '10.244.0.9', { kind: 'sandbox' }));
    assert.ok('tenant' in r, JSON.stringify(r));
    assert.deepEqual(r.tenant.subject, { sessionId: 'agents/notebook' });
    assert.equal(r.tenant.principal, 'bob');
    assert.equal(r.tenant.network.egress, 'allowlist');
  });

  test("a session's credential from another pod, or a run's from the session's pod: 407", () => {
    const { tenants } = setup();
    for (const req of [
      request(SESSION, '10.244.0.7', { kind: 'sandbox' }),
      request(UID, '10.244.0.9'),
      request(SESSION, '10.244.0.9', {
        kind: 'sandbox',
        password: egressCredential(KEY, { kind: 'run', uid: SESSION }),
      }),
      request(SESSION, '10.244.0.9'),
    ]) {
      const r = tenants.tenantOf(req);
      assert.ok('refused' in r && r.refused.status === 407, JSON.stringify(r));
    }
  });

  test('a session that ended, or that has no allowlist: 403 no-egress', () => {
    const { tenants, state } = setup();
    for (const sandboxes of [
      [sandbox(SESSION, ALLOW, 'Expired')],
      [sandbox(SESSION, { egress: 'none' })],
      [],
    ]) {
      state.sandboxes = sandboxes;
      const r = tenants.tenantOf(request(SESSION, '10.244.0.9', { kind: 'sandbox' }));
      assert.ok('refused' in r && r.refused.reason === 'no-egress', JSON.stringify(r));
    }
  });

  test('sourceAddress: IPv4-mapped addresses as IPv4, others as written', () => {
    assert.equal(sourceAddress('::ffff:10.1.2.3'), '10.1.2.3');
    assert.equal(sourceAddress('fd00::1'), 'fd00::1');
    assert.equal(sourceAddress(undefined), undefined);
  });
});
