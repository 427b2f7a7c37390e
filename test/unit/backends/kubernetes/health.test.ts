import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { leaseHeld } from '../../../../src/backends/kubernetes/health.js';

const NOW = Date.parse('2026-01-01T00:01:00Z');
const lease = (renewTime: string | undefined, holderIdentity: string | undefined = 'op-1') => ({
  spec: {
    holderIdentity,
    leaseDurationSeconds: 15,
    ...(renewTime ? { renewTime } : {}),
  },
});

describe('leaseHeld: an operator leads when the holder renewed within the duration', () => {
  test('renewed 5 s ago: held', () => {
    const r = leaseHeld(lease('2026-01-01T00:00:55Z'), NOW);
    assert.equal(r.held, true);
    assert.match(r.detail, /operator op-1 leads \(renewed 5 s ago\)/);
  });
  test('renewed 60 s ago: not held', () => {
    const r = leaseHeld(lease('2026-01-01T00:00:00Z'), NOW);
    assert.equal(r.held, false);
    assert.match(r.detail, /last renewed it 60 s ago \(duration 15 s\)/);
  });
  test('no Lease, no holder, never renewed', () => {
    assert.equal(leaseHeld(undefined, NOW).held, false);
    assert.equal(leaseHeld(lease('2026-01-01T00:00:55Z', ''), NOW).held, false);
    assert.equal(leaseHeld(lease(undefined), NOW).held, false);
  });
});
