import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  computePoolStatus,
  type PoolStatusInput,
} from '../../../../src/controller/sandboxpool/compute-status.js';

const NOW = '2026-01-01T12:00:00.000Z';
const base: PoolStatusInput = {
  generation: 4,
  current: {},
  stalled: undefined,
  replicas: 2,
  counts: { ready: 2, starting: 0, claimed: 1 },
  failures: 0,
  selector: 'sandpit.dev/pool-uid=u,sandpit.dev/pool-pod=idle',
  now: NOW,
};
const cond = (s: ReturnType<typeof computePoolStatus>, type: string) =>
  s.conditions?.find((c) => c.type === type);

describe('computePoolStatus', () => {
  test('every wanted pod ready: Ready True; counts, selector and generations', () => {
    const s = computePoolStatus(base);
    assert.deepEqual(
      { ...s, conditions: undefined },
      {
        replicas: 2,
        readyReplicas: 2,
        startingReplicas: 0,
        claimedReplicas: 1,
        selector: base.selector,
        conditions: undefined,
        observedGeneration: 4,
      },
    );
    assert.equal(cond(s, 'Ready')?.status, 'True');
    assert.equal(cond(s, 'Stalled')?.status, 'False');
    assert.equal(cond(s, 'Reconciling')?.status, 'False');
    for (const c of s.conditions ?? []) {
      assert.equal(c.observedGeneration, 4);
      assert.equal(c.lastTransitionTime, NOW);
    }
    assert.equal(s.message, undefined);
  });

  test('pods starting: Reconciling, not Ready; replicas counts ready and starting', () => {
    const s = computePoolStatus({ ...base, counts: { ready: 1, starting: 1, claimed: 0 } });
    assert.equal(s.replicas, 2);
    assert.equal(cond(s, 'Ready')?.status, 'False');
    assert.equal(cond(s, 'Reconciling')?.status, 'True');
    assert.equal(cond(s, 'Reconciling')?.reason, 'ScalingUp');
    assert.match(cond(s, 'Reconciling')?.message ?? '', /1 of 2 pods ready, 1 starting/);
  });

  test('pods that keep failing: Reconciling with reason PodsFailing', () => {
    const s = computePoolStatus({ ...base, failures: 3, counts: { ready: 0, starting: 0, claimed: 0 } });
    assert.equal(cond(s, 'Reconciling')?.status, 'True');
    assert.equal(cond(s, 'Reconciling')?.reason, 'PodsFailing');
    assert.match(cond(s, 'Reconciling')?.message ?? '', /keep failing \(3 times\)/);
  });

  test('denied: Stalled with the reason and the message, no pods wanted', () => {
    const stalled = { reason: 'PolicyDenied', message: 'denied by policy: resources.memory: too much' };
    const s = computePoolStatus({
      ...base,
      stalled,
      replicas: 0,
      counts: { ready: 0, starting: 0, claimed: 0 },
    });
    assert.equal(s.message, stalled.message);
    assert.equal(cond(s, 'Stalled')?.status, 'True');
    assert.equal(cond(s, 'Stalled')?.reason, 'PolicyDenied');
    assert.equal(cond(s, 'Ready')?.status, 'False');
    assert.equal(cond(s, 'Reconciling')?.status, 'False');
  });

  test('a condition keeps its lastTransitionTime while its status stays', () => {
    const first = computePoolStatus(base);
    const later = computePoolStatus({ ...base, current: first, now: '2026-01-01T13:00:00.000Z' });
    assert.equal(cond(later, 'Ready')?.lastTransitionTime, NOW);
    const dropped = computePoolStatus({
      ...base,
      current: later,
      counts: { ready: 1, starting: 1, claimed: 0 },
      now: '2026-01-01T14:00:00.000Z',
    });
    assert.equal(cond(dropped, 'Ready')?.lastTransitionTime, '2026-01-01T14:00:00.000Z');
  });
});
