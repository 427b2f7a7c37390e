// The session use cases (the service every transport calls) over the Kubernetes backend, as two
// gateway replicas would run them: two SandpitServices, each with its own backend as the static
// gateway identity. A session made through one is served by the other (take-over of its Lease),
// and a restarted replica keeps it. The hand-over latency is printed as a diagnostic.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoordinationV1Api } from '@kubernetes/client-node';
import type { Principal } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import type { AuditRecord } from '../../../src/api/audit.js';
import type { AuditTrail } from '../../../src/observability/audit-trail.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { AppError } from '../../../src/shared/errors.js';
import { withCluster, type KubeCluster } from '../../support/kube/index.js';
import { bindGatewayRbac, gatewayBackend } from '../../contract/kube-gateway.js';
import { installOperatorApi } from './operator-harness.js';
import { serveSessionPods } from './session-pods.js';

let cluster: KubeCluster;
let ns: string;
let pods: ReturnType<typeof serveSessionPods>;
const services: SandpitService[] = [];
/** Every replica's audit records, in one trail. */
const audited: AuditRecord[] = [];
const audit: AuditTrail = {
  assertAvailable() {},
  record: (r) => void audited.push(r),
  open: () => Promise.resolve(),
  flush: () => Promise.resolve(),
  written: () => Promise.resolve(),
  close: () => Promise.resolve(),
  file: undefined,
};

const alice: Principal = { id: 'p-alice', name: 'alice', scope: {} };
const mallory: Principal = { id: 'p-mallory', name: 'mallory', scope: {} };

function replica(replicaId: string, lingerMs = 1000): SandpitService {
  const metrics = createMetrics();
  const backend = gatewayBackend(cluster, ns, {
    replicaId,
    sessions: { lingerMs, takeWaitMs: 15_000 },
  });
  const service = new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics,
    audit,
    slots: { maxConcurrent: 4, maxQueued: 16 },
  });
  services.push(service);
  return service;
}

async function holder(name: string): Promise<string | undefined> {
  return (await cluster.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: ns, name })).spec
    ?.holderIdentity;
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof AppError, String(e));
    return e.code;
  }
  assert.fail('expected a refusal');
}

describe('the session service over the kubernetes backend, on two replicas', { timeout: 600_000 }, () => {
  before(async () => {
    cluster = await withCluster();
    await installOperatorApi(cluster);
    ns = await cluster.createNamespace('gateway-sessions-service');
    await bindGatewayRbac(cluster, ns);
    pods = serveSessionPods(cluster, ns);
  });
  after(async () => {
    pods.stop();
    await Promise.all(services.map((s) => s.shutdown()));
    if (process.env.SANDPIT_KEEP_TEST_NAMESPACES !== '1') await cluster.deleteNamespace(ns);
  });

  test('an idle timeout under 60 s is refused before any Sandbox exists, naming the field', async () => {
    const a = replica('svc-floor');
    try {
      await a.sessions.create({ template: 'python', idleTimeoutSeconds: 30 }, alice);
      assert.fail('expected a refusal');
    } catch (e) {
      assert.ok(e instanceof AppError);
      assert.equal(e.code, 'POLICY_DENIED');
      assert.deepEqual(
        e.violations.map((v) => v.field),
        ['idleTimeoutSeconds'],
      );
    }
  });

  test('made through one replica, served by another and back; another principal gets 404', async (t) => {
    const a = replica('svc-a');
    const b = replica('svc-b');
    const created = performance.now();
    const session = await a.sessions.create({ template: 'python' }, alice);
    t.diagnostic(`create → ready through the service: ${Math.round(performance.now() - created)} ms`);
    await a.sessions.writeFile(session.id, alice, { path: 'shared.txt', content: Buffer.from('from a\n') });
    const first = await a.sessions.exec(session.id, alice, { command: ['cat', 'shared.txt'] }).result;
    assert.equal(first.stdout, 'from a\n');

    assert.equal(
      await code(b.sessions.get(session.id, mallory)),
      'NOT_FOUND',
      "another principal's session is not found",
    );
    // b's first request on it: a still holds it for its linger, then lets go and b takes over.
    const handedAt = performance.now();
    await b.sessions.serve(session.id, alice);
    const onB = await b.sessions.exec(session.id, alice, { command: ['cat', 'shared.txt'] }).result;
    const handOver = performance.now() - handedAt;
    assert.equal(onB.stdout, 'from a\n', 'the same workspace');
    assert.equal(await holder(session.id), 'svc-b');
    t.diagnostic(`hand-over while the holder lingers (1 s): ${Math.round(handOver)} ms`);

    // Once b let go (after its linger), a takes it back at once: a released Lease.
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(await holder(session.id), '', 'idle, b released the Lease');
    const backAt = performance.now();
    const back = await a.sessions.exec(session.id, alice, { command: ['echo', 'back'] }).result;
    t.diagnostic(`take-over of a released Lease + exec: ${Math.round(performance.now() - backAt)} ms`);
    assert.equal(back.stdout, 'back\n');
    assert.equal(await holder(session.id), 'svc-a');

    const view = await b.sessions.delete(session.id, alice);
    assert.equal(view.state, 'Deleted');
    // a, which still held it, sees its pod go and ends it too: the deletion is audited once, by b.
    const deadline = Date.now() + 60_000;
    while ((await a.sessions.get(session.id, alice)).state === 'Ready') {
      assert.ok(Date.now() < deadline, 'a saw the session end within 60 s');
      await new Promise((r) => setTimeout(r, 250));
      await a.sessions.serve(session.id, alice);
    }
    assert.equal((await a.sessions.get(session.id, alice)).state, 'Deleted');
    const ends = audited.filter((r) => r.event === 'session.deleted' && r.sessionId === session.id);
    assert.equal(ends.length, 1, JSON.stringify(ends));
  });

  test('a restarted replica keeps the session: found by its Sandbox on start-up', async () => {
    const a = replica('svc-c');
    const session = await a.sessions.create({ template: 'bash' }, alice);
    await a.sessions.exec(session.id, alice, { shell: 'echo kept > k' }).result;
    await a.shutdown(); // a graceful stop: the session keeps running, its Lease released
    const restarted = replica('svc-c2');
    const { adopted } = await restarted.sessions.adopt();
    assert.ok(adopted >= 1);
    const r = await restarted.sessions.exec(session.id, alice, { command: ['cat', 'k'] }).result;
    assert.equal(r.stdout, 'kept\n');
    await restarted.sessions.delete(session.id, alice);
  });
});
