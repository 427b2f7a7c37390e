import assert from 'node:assert/strict';
import { describe, mock, test } from 'node:test';
import { ACTIVITY_WRITE_SECONDS } from '../../../../../src/api/v1alpha1/sandbox.js';
import {
  buildSessionLease,
  channelKeyOf,
  LEASE_DURATION_SECONDS,
  lastHolderOf,
  liveHolder,
  SessionLease,
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

describe("the holder's activity writes", () => {
  test('at most one per period, counted from when a write is sent: a touch while one is in flight waits', async (t) => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now });
    t.after(() => mock.timers.reset());
    const period = ACTIVITY_WRITE_SECONDS * 1000;
    const sent: number[] = [];
    let answer: (() => void) | undefined;
    const kube = {
      createLease: (_ns: string, l: typeof lease) => Promise.resolve(l),
      getLease: () => Promise.resolve(lease),
      replaceLease: (_ns: string, l: typeof lease) => {
        sent.push(Date.now());
        return new Promise<typeof lease>((r) => (answer = () => r(l)));
      },
    };
    const held = await SessionLease.create(kube, {
      namespace: 'ns',
      name: 'ses-1',
      sandboxUid: 'u',
      holder: 'gw-a',
      key,
      now,
    });
    const settle = () => new Promise((r) => setImmediate(r));
    held.touch();
    mock.timers.tick(period);
    await settle();
    assert.deepEqual(sent, [now + period], 'the trailing edge, one period after the create');
    mock.timers.tick(500);
    held.touch(); // activity while the apiserver has not answered yet
    answer?.();
    await settle();
    mock.timers.tick(period - 501);
    await settle();
    assert.equal(sent.length, 1, 'no second write within the period of the first');
    mock.timers.tick(1);
    await settle();
    assert.deepEqual(sent, [now + period, now + 2 * period]);
    answer?.();
  });
});
