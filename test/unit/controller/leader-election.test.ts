import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  canAcquire,
  leaseRecord,
  microTime,
  nextRecord,
  observe,
  type LeaseRecord,
} from '../../../src/controller/leader-election.js';

const rec = (over: Partial<LeaseRecord> = {}): LeaseRecord => ({
  holder: 'a',
  leaseDurationSeconds: 15,
  acquireTime: microTime(0),
  renewTime: microTime(0),
  transitions: 0,
  ...over,
});

describe('leader election decisions', () => {
  test('MicroTime has six fractional digits', () => {
    assert.equal(microTime(Date.UTC(2026, 0, 1, 0, 0, 0, 123)), '2026-01-01T00:00:00.123000Z');
  });

  test('a free lease, or one we hold, can be taken at once', () => {
    assert.equal(canAcquire('b', observe(undefined, rec({ holder: '' }), 1000), 1000), true);
    assert.equal(canAcquire('a', observe(undefined, rec(), 1000), 1000), true);
  });

  test('another holder’s lease: only after watching it unchanged for a whole lease duration', () => {
    const seen = observe(undefined, rec(), 1000);
    assert.equal(canAcquire('b', seen, 1000 + 14_999), false);
    assert.equal(canAcquire('b', seen, 1000 + 15_000), true);
  });

  test('a renewal restarts the wait; an unchanged record keeps its first-seen time', () => {
    const first = observe(undefined, rec(), 1000);
    assert.equal(observe(first, rec(), 9000), first);
    const renewed = observe(first, rec({ renewTime: microTime(5000) }), 9000);
    assert.equal(renewed.observedAt, 9000);
    assert.equal(canAcquire('b', renewed, 1000 + 15_000), false);
  });

  test('taking over counts a transition and sets acquireTime; renewing keeps both', () => {
    const taken = nextRecord('b', rec(), 15, 20_000);
    assert.equal(taken.holder, 'b');
    assert.equal(taken.transitions, 1);
    assert.equal(taken.acquireTime, microTime(20_000));
    const renewed = nextRecord('b', taken, 15, 22_000);
    assert.equal(renewed.transitions, 1);
    assert.equal(renewed.acquireTime, microTime(20_000));
    assert.equal(renewed.renewTime, microTime(22_000));
    assert.equal(
      nextRecord('c', rec({ holder: '' }), 15, 1).transitions,
      0,
      'a released lease is not a transition',
    );
  });

  test('leaseRecord reads a stored Lease', () => {
    const r = leaseRecord({
      spec: {
        holderIdentity: 'x',
        leaseDurationSeconds: 6,
        renewTime: '1970-01-01T00:00:00.000000Z',
        leaseTransitions: 2,
      },
    });
    assert.deepEqual(r, {
      holder: 'x',
      leaseDurationSeconds: 6,
      acquireTime: undefined,
      renewTime: '1970-01-01T00:00:00.000000Z',
      transitions: 2,
    });
  });
});
