import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  LABEL_MANAGED_BY,
  LABEL_POOL,
  LABEL_POOL_POD,
  LABEL_POOL_SHAPE,
  LABEL_SESSION_UID,
  SANDBOX_CONTAINER,
} from '../../../../src/api/v1alpha1/labels.js';
import {
  claimCandidates,
  claimedPod,
  type ClaimRequest,
} from '../../../../src/controller/pod/claim-pool-pod.js';
import type { Pod } from '../../../../src/kube/objects.js';

const NOW = new Date('2026-12-02T02:00:00Z');
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();

function poolPod(
  name: string,
  o: { state?: string; shape?: string; ready?: boolean; age?: number; owner?: string } = {},
): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'agents',
      resourceVersion: '7',
      creationTimestamp: ago(o.age ?? 60),
      labels: {
        [LABEL_MANAGED_BY]: 'sandpit-operator',
        [LABEL_POOL]: 'py',
        [LABEL_POOL_POD]: o.state ?? 'idle',
        [LABEL_POOL_SHAPE]: o.shape ?? 'shape-a',
      },
      ownerReferences: [
        {
          apiVersion: 'sandpit.dev/v1alpha1',
          kind: o.owner ?? 'SandboxPool',
          name: 'py',
          uid: 'pool-uid',
          controller: true,
        },
      ],
    },
    spec: {
      activeDeadlineSeconds: 3700,
      containers: [{ name: SANDBOX_CONTAINER, image: 'sandpit/python:3.11' }],
    },
    status: {
      phase: 'Running',
      startTime: ago(o.age ?? 60),
      conditions: [{ type: 'Ready', status: o.ready === false ? 'False' : 'True' }],
      containerStatuses: [
        {
          name: SANDBOX_CONTAINER,
          ready: o.ready !== false,
          restartCount: 0,
          image: '',
          imageID: '',
          state: { running: {} },
        },
      ],
    },
  };
}

const request: ClaimRequest = {
  owner: {
    apiVersion: 'sandpit.dev/v1alpha1',
    kind: 'Sandbox',
    name: 's1',
    namespace: 'agents',
    uid: 'sbx-uid',
  },
  ownerLabels: { [LABEL_SESSION_UID]: 'sbx-uid' },
  shapeLabel: 'shape-a',
  remainingSeconds: 100,
  now: NOW,
};

describe('claiming a pool pod', () => {
  test('candidates: idle, ready, of the shape, owned by a SandboxPool, in the namespace; oldest first', () => {
    const pods = [
      poolPod('young', { age: 10 }),
      poolPod('old', { age: 500 }),
      poolPod('claimed', { state: 'claimed' }),
      poolPod('other-shape', { shape: 'shape-b' }),
      poolPod('starting', { ready: false }),
      poolPod('not-a-pool', { owner: 'SandboxRun' }),
      { ...poolPod('elsewhere'), metadata: { ...poolPod('elsewhere').metadata, namespace: 'other' } },
      { ...poolPod('going'), metadata: { ...poolPod('going').metadata, deletionTimestamp: ago(1) } },
    ];
    assert.deepEqual(
      claimCandidates(pods, 'agents', 'shape-a').map((p) => p.metadata?.name),
      ['old', 'young'],
    );
  });

  test('the claim moves the pod to its owner in one object: labels, sole controller, lowered deadline, same resourceVersion', () => {
    const claimed = claimedPod(poolPod('p', { age: 60 }), request);
    assert.equal(claimed.metadata?.resourceVersion, '7');
    assert.equal(claimed.metadata?.labels?.[LABEL_POOL_POD], 'claimed');
    assert.equal(claimed.metadata?.labels?.[LABEL_SESSION_UID], 'sbx-uid');
    assert.equal(claimed.metadata?.labels?.[LABEL_POOL_SHAPE], 'shape-a', 'the pool still counts it');
    assert.deepEqual(claimed.metadata?.ownerReferences, [
      { apiVersion: 'sandpit.dev/v1alpha1', kind: 'Sandbox', name: 's1', uid: 'sbx-uid', controller: true },
    ]);
    assert.equal(claimed.spec?.activeDeadlineSeconds, 160, 'its age plus what the owner may take');
  });

  test('activeDeadlineSeconds is only ever lowered', () => {
    const claimed = claimedPod(poolPod('p', { age: 60 }), { ...request, remainingSeconds: 10_000 });
    assert.equal(claimed.spec?.activeDeadlineSeconds, 3700);
  });
});
