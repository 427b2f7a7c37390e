import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  buildSessionLease,
  channelKeyOf,
  LEASE_DURATION_SECONDS,
  lastHolderOf,
  liveHolder,
  takenBy,
} from '../../../../../src/backends/kubernetes/sessions/session-lease.js';

const key = Buffer.alloc(16, 7);
const now = Date.parse('2026-12-01T10:00:00.000Z');
const lease = buildSessionLease({
  namespace: 'ns',
  name: 'ses-1',
  sandboxUid: 'uid-1',
  holder: 'gw-a',
  key,
  now,
});

describe('the session Lease', () => {
  test('same name as its Sandbox, owned by it, labelled, the channel key annotated, held by its creator', () => {
    assert.equal(lease.metadata?.name, 'ses-1');
    assert.deepEqual(lease.metadata?.ownerReferences, [
      { apiVersion: 'sandpit.dev/v1alpha1', kind: 'Sandbox', name: 'ses-1', uid: 'uid-1' },
    ]);
    assert.equal(lease.metadata?.labels?.['sandpit.dev/session'], 'ses-1');
    assert.equal(lease.metadata?.annotations?.['sandpit.dev/channel-key'], key.toString('hex'));
    assert.deepEqual(channelKeyOf(lease), key);
    assert.equal(lastHolderOf(lease), 'gw-a');
    assert.equal(lease.spec?.holderIdentity, 'gw-a');
    assert.equal(lease.spec?.renewTime, '2026-12-01T10:00:00.000000Z', 'a MicroTime');
    assert.equal(lease.spec?.leaseDurationSeconds, LEASE_DURATION_SECONDS);
  });

  test('a held Lease is live until renewTime + leaseDurationSeconds; a released one has no holder', () => {
    assert.equal(liveHolder(lease, now + 1000), 'gw-a');
    assert.equal(liveHolder(lease, now + LEASE_DURATION_SECONDS * 1000 - 1), 'gw-a');
    assert.equal(
      liveHolder(lease, now + LEASE_DURATION_SECONDS * 1000),
      undefined,
      'its holder is presumed dead',
    );
    const released = { ...lease, spec: { ...lease.spec, holderIdentity: '' } };
    assert.equal(liveHolder(released, now), undefined);
  });

  test('taking over: the new holder, a fresh acquire and renew time, one more transition; keeping counts none', () => {
    const later = now + 60_000;
    const taken = takenBy(lease, 'gw-b', later);
    assert.equal(taken.spec?.holderIdentity, 'gw-b');
    assert.equal(taken.spec?.acquireTime, '2026-12-01T10:01:00.000000Z');
    assert.equal(taken.spec?.renewTime, '2026-12-01T10:01:00.000000Z');
    assert.equal(taken.spec?.leaseTransitions, 1);
    assert.equal(lastHolderOf(taken), 'gw-b');
    assert.equal(
      lastHolderOf({ ...taken, spec: { ...taken.spec, holderIdentity: '' } }),
      'gw-b',
      'released, the Lease still names who held it last',
    );
    const kept = takenBy(taken, 'gw-b', later + 1000);
    assert.equal(kept.spec?.leaseTransitions, 1);
    assert.equal(kept.spec?.acquireTime, taken.spec?.acquireTime);
    assert.equal(
      kept.metadata?.annotations?.['sandpit.dev/channel-key'],
      key.toString('hex'),
      'the key stays',
    );
  });

  test('a Lease without a usable channel key is refused', () => {
    assert.throws(
      () => channelKeyOf({ metadata: { name: 'x', annotations: { 'sandpit.dev/channel-key': 'abc' } } }),
      /channel key/,
    );
  });
});
