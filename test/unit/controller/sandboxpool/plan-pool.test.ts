import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from '../../../../src/kube/objects.js';
import {
  planPool,
  REFILL_DELAY_MS,
  type PoolPodsInput,
} from '../../../../src/controller/sandboxpool/plan-pool.js';

const POOL_UID = 'pool-uid-1';
const SHAPE = 'a'.repeat(32);
const NOW = '2026-01-01T12:00:00.000Z';

interface PodOptions {
  name: string;
  ageSeconds?: number;
  ready?: boolean;
  phase?: string;
  shape?: string;
  claimed?: boolean;
  /** ms before NOW that the claim was made (no claim time when undefined). */
  claimedMsAgo?: number;
  deleting?: boolean;
}

function pod(o: PodOptions): Pod {
  const created = new Date(Date.parse(NOW) - (o.ageSeconds ?? 10) * 1000).toISOString();
  const owner = o.claimed
    ? { apiVersion: 'sandpit.dev/v1alpha1', kind: 'SandboxRun', name: 'r', uid: 'run-uid', controller: true }
    : { apiVersion: 'sandpit.dev/v1alpha1', kind: 'SandboxPool', name: 'p', uid: POOL_UID, controller: true };
  const ready = o.ready ?? true;
  return {
    metadata: {
      name: o.name,
      uid: `uid-${o.name}`,
      creationTimestamp: created,
      ...(o.deleting ? { deletionTimestamp: NOW } : {}),
      ...(o.claimedMsAgo === undefined
        ? {}
        : {
            annotations: {
              'sandpit.dev/claimed-at': new Date(Date.parse(NOW) - o.claimedMsAgo).toISOString(),
            },
          }),
      labels: {
        'sandpit.dev/pool-uid': POOL_UID,
        'sandpit.dev/pool-pod': o.claimed ? 'claimed' : 'idle',
        'sandpit.dev/pool-shape': o.shape ?? SHAPE,
      },
      ownerReferences: [owner],
    },
    status: {
      phase: o.phase ?? (ready ? 'Running' : 'Pending'),
      conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
    },
  };
}

const input = (pods: Pod[], over: Partial<PoolPodsInput> = {}): PoolPodsInput => ({
  pods,
  poolUid: POOL_UID,
  shapeLabel: SHAPE,
  replicas: 3,
  maxIdleSeconds: 600,
  now: NOW,
  ...over,
});

const names = (pods: readonly Pod[]): string[] => pods.map((p) => p.metadata?.name ?? '');
const removed = (plan: ReturnType<typeof planPool>) =>
  plan.remove.map((r) => `${r.pod.metadata?.name}:${r.reason}`).sort();

describe('planPool', () => {
  test('an empty pool creates its replicas', () => {
    const plan = planPool(input([]));
    assert.equal(plan.create, 3);
    assert.deepEqual(plan.remove, []);
    assert.equal(plan.nextExpiryMs, undefined);
  });

  test('ready and starting pods count toward replicas; claimed ones are counted apart and never touched', () => {
    const plan = planPool(
      input([pod({ name: 'a' }), pod({ name: 'b', ready: false }), pod({ name: 'c', claimed: true })]),
    );
    assert.deepEqual(names(plan.ready), ['a']);
    assert.deepEqual(names(plan.starting), ['b']);
    assert.equal(plan.claimed, 1);
    assert.equal(plan.create, 1);
    assert.deepEqual(plan.remove, []);
  });

  test('ended, aged-out and other-shape pods are replaced', () => {
    const plan = planPool(
      input([
        pod({ name: 'ok' }),
        pod({ name: 'failed', phase: 'Failed', ready: false }),
        pod({ name: 'old', ageSeconds: 601 }),
        pod({ name: 'other', shape: 'b'.repeat(32) }),
      ]),
    );
    assert.deepEqual(removed(plan), ['failed:Ended', 'old:Expired', 'other:ShapeChanged']);
    assert.deepEqual(names(plan.ready), ['ok']);
    assert.equal(plan.create, 2);
    assert.equal(plan.nextExpiryMs, (600 - 10) * 1000, 'when the kept pod ages out');
  });

  test('surplus goes starting before ready, newest first', () => {
    const pods = [
      pod({ name: 'r-old', ageSeconds: 100 }),
      pod({ name: 'r-new', ageSeconds: 5 }),
      pod({ name: 's-old', ageSeconds: 50, ready: false }),
      pod({ name: 's-new', ageSeconds: 2, ready: false }),
    ];
    assert.deepEqual(removed(planPool(input(pods, { replicas: 3 }))), ['s-new:ScaledDown']);
    const toOne = planPool(input(pods, { replicas: 1 }));
    assert.deepEqual(removed(toOne), ['r-new:ScaledDown', 's-new:ScaledDown', 's-old:ScaledDown']);
    assert.deepEqual(names(toOne.ready), ['r-old']);
    assert.deepEqual(names(toOne.starting), []);
    assert.equal(toOne.create, 0);
  });

  test('a denied pool (no shape, no replicas) removes every idle pod and keeps the claimed ones', () => {
    const plan = planPool(
      input([pod({ name: 'a' }), pod({ name: 'c', claimed: true })], { shapeLabel: undefined, replicas: 0 }),
    );
    assert.deepEqual(removed(plan), ['a:ShapeChanged']);
    assert.equal(plan.claimed, 1);
    assert.equal(plan.create, 0);
  });

  test("a claimed pod's replacement waits REFILL_DELAY_MS from its claim, unless the pod ended", () => {
    const idle = [pod({ name: 'a' }), pod({ name: 'b' })];
    const young = planPool(input([...idle, pod({ name: 'c', claimed: true, claimedMsAgo: 200 })]));
    assert.equal(young.create, 0, 'held while its run may still be going');
    assert.equal(young.claimed, 1);
    assert.equal(young.nextRefillMs, REFILL_DELAY_MS - 200, 'looked at again when it is due');
    const due = planPool(input([...idle, pod({ name: 'c', claimed: true, claimedMsAgo: REFILL_DELAY_MS })]));
    assert.equal(due.create, 1);
    assert.equal(due.nextRefillMs, undefined);
    for (const ended of [
      pod({ name: 'c', claimed: true, claimedMsAgo: 200, phase: 'Succeeded', ready: false }),
      pod({ name: 'c', claimed: true, claimedMsAgo: 200, deleting: true }),
      pod({ name: 'c', claimed: true }), // claimed by an operator that stamped no time
    ]) {
      const plan = planPool(input([...idle, ended]));
      assert.equal(plan.create, 1, names([ended]).join());
      assert.equal(plan.nextRefillMs, undefined);
    }
  });

  test('a terminating pod is neither counted nor deleted again', () => {
    const plan = planPool(input([pod({ name: 'going', deleting: true })], { replicas: 1 }));
    assert.deepEqual(plan.remove, []);
    assert.equal(plan.ready.length + plan.starting.length, 0);
    assert.equal(plan.create, 1);
  });
});
