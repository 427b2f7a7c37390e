/**
 * LeasedSession.endedElsewhere(): how a replica that does not hold a session learns its end from
 * the Sandbox, and whether it is the one to audit it (the replica that held it last, as the Lease
 * says). The real Lease and Sandbox are the kube tier's (gateway-sessions-service.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  LeasedSession,
  servedOf,
  type LeasedSessionDeps,
} from '../../../../../src/backends/kubernetes/sessions/leased-session.js';
import { buildSessionLease, takenBy } from '../../../../../src/backends/kubernetes/sessions/session-lease.js';
import type { Lease } from '../../../../../src/kube/objects.js';

const ref = { namespace: 'ns', name: 'ses-1', uid: 'uid-1', podName: 'ses-1-pod' };
const now = Date.parse('2026-12-01T10:00:00.000Z');
const created = buildSessionLease({
  ...ref,
  sandboxUid: ref.uid,
  holder: 'gw-a',
  key: Buffer.alloc(16),
  now,
});
/** Taken by B, then released: holderIdentity is cleared, the last holder stays. */
const releasedByB: Lease = (() => {
  const taken = takenBy(created, 'gw-b', now + 1000);
  return { ...taken, spec: { ...taken.spec, holderIdentity: '' } };
})();

function session(holder: string, sandbox: unknown, lease: Lease | undefined): LeasedSession {
  const kube = {
    getObject: () => Promise.resolve(sandbox),
    getLease: () => Promise.resolve(lease),
  } as unknown as LeasedSessionDeps['kube'];
  return new LeasedSession({ kube, holder, lingerMs: 1000, takeWaitMs: 1000 }, { ref, principal: 'token:a' });
}

const expired = {
  metadata: { name: 'ses-1', uid: 'uid-1' },
  status: { phase: 'Expired', reason: 'IdleExpired', message: 'idle' },
};

describe('a session another replica may serve: its end as the Sandbox records it', () => {
  test('a live Sandbox: no end, and the Lease is not read', async () => {
    let leaseReads = 0;
    const kube = {
      getObject: () => Promise.resolve({ ...expired, status: { phase: 'Ready' } }),
      getLease: () => (leaseReads++, Promise.resolve(created)),
    } as unknown as LeasedSessionDeps['kube'];
    const s = new LeasedSession(
      { kube, holder: 'gw-a', lingerMs: 1000, takeWaitMs: 1000 },
      { ref, principal: 'token:a' },
    );
    assert.equal(await s.endedElsewhere(), undefined);
    assert.equal(leaseReads, 0);
  });

  test('an end the Sandbox records is audited by the replica that held the session last, and by no other', async () => {
    const onA = await session('gw-a', expired, releasedByB).endedElsewhere();
    const onB = await session('gw-b', expired, releasedByB).endedElsewhere();
    assert.deepEqual(onA, { reason: 'IdleExpired', message: 'idle', recordedElsewhere: true });
    assert.deepEqual(onB, { reason: 'IdleExpired', message: 'idle', recordedElsewhere: false });
    // Held by its creator and never taken over: the creator records it.
    assert.equal((await session('gw-a', expired, created).endedElsewhere())?.recordedElsewhere, false);
    assert.equal((await session('gw-b', expired, created).endedElsewhere())?.recordedElsewhere, true);
  });

  test('a Lease that names no last holder leaves the record to the replica that finds the end', async () => {
    const unnamed: Lease = {
      ...created,
      metadata: { ...created.metadata, annotations: {} },
      spec: { ...created.spec, holderIdentity: '' },
    };
    assert.equal((await session('gw-a', expired, unnamed).endedElsewhere())?.recordedElsewhere, false);
    assert.equal((await session('gw-a', expired, undefined).endedElsewhere())?.recordedElsewhere, false);
  });

  test('a Sandbox gone was deleted through another replica, which recorded it', async () => {
    const end = await session('gw-a', undefined, undefined).endedElsewhere();
    assert.deepEqual([end?.reason, end?.recordedElsewhere], ['Deleted', true]);
  });
});

describe('servedOf: how the operator served a session, which the gateway reports (a pool’s pod: warm)', () => {
  test('warm when the Sandbox’s status says so', () => {
    assert.equal(
      servedOf({ metadata: {}, status: { phase: 'Ready', served: 'warm', pool: 'py' } } as never),
      'warm',
    );
  });
  test('cold when it says cold, says nothing, or there is no Sandbox', () => {
    assert.equal(servedOf({ metadata: {}, status: { phase: 'Ready', served: 'cold' } } as never), 'cold');
    assert.equal(servedOf({ metadata: {}, status: { phase: 'Ready' } } as never), 'cold');
    assert.equal(servedOf(undefined), 'cold');
  });
  test('a LeasedSession made from a warm Sandbox says warm (before: every Kubernetes session said cold)', () => {
    const s = new LeasedSession(
      { kube: {} as LeasedSessionDeps['kube'], holder: 'gw', lingerMs: 1000, takeWaitMs: 1000 },
      { ref, principal: 'token:a', served: servedOf({ metadata: {}, status: { served: 'warm' } } as never) },
    );
    assert.equal(s.served, 'warm');
  });
});
