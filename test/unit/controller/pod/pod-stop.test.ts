import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from '../../../../src/kube/objects.js';
import {
  FORCE_DELETE_AFTER_MS,
  forceDeletionInMs,
  LINGER_MS,
  podStopStep,
} from '../../../../src/controller/pod/pod-stop.js';
import { RUN } from '../fixtures.js';

const NOW = new Date('2026-11-29T12:00:00Z');

function pod(
  options: { phase?: string; deletedAgoMs?: number; owner?: string; finishedAgoMs?: number } = {},
): Pod {
  return {
    metadata: {
      name: 'hello-abc',
      uid: 'pod-uid',
      ownerReferences: [
        {
          apiVersion: 'sandpit.dev/v1alpha1',
          kind: 'SandboxRun',
          name: RUN.name,
          uid: options.owner ?? RUN.uid,
          controller: true,
        },
      ],
      ...(options.deletedAgoMs === undefined
        ? {}
        : { deletionTimestamp: new Date(NOW.getTime() - options.deletedAgoMs).toISOString() }),
    },
    status: {
      phase: options.phase ?? 'Running',
      ...(options.finishedAgoMs === undefined
        ? {}
        : {
            containerStatuses: [
              {
                name: 'sandbox',
                state: {
                  terminated: {
                    exitCode: 0,
                    finishedAt: new Date(NOW.getTime() - options.finishedAgoMs).toISOString(),
                  },
                },
              },
            ],
          }),
    },
  } as Pod;
}

describe('podStopStep', () => {
  test('no pod, or a pod the run does not control: nothing to do', () => {
    assert.deepEqual(podStopStep(undefined, RUN.uid, NOW), { action: 'none' });
    assert.deepEqual(podStopStep(pod({ owner: 'someone-else' }), RUN.uid, NOW), { action: 'none' });
  });

  test('a running pod is deleted gracefully, and looked at again later', () => {
    assert.deepEqual(podStopStep(pod(), RUN.uid, NOW), {
      action: 'delete',
      recheckMs: FORCE_DELETE_AFTER_MS,
    });
    assert.equal(podStopStep(pod({ phase: 'Pending' }), RUN.uid, NOW).action, 'delete');
  });

  test('a finished pod is kept (its log is the output)', () => {
    assert.deepEqual(podStopStep(pod({ phase: 'Succeeded' }), RUN.uid, NOW), { action: 'none' });
    assert.deepEqual(podStopStep(pod({ phase: 'Failed' }), RUN.uid, NOW), { action: 'none' });
  });

  test("a session's finished pod is deleted (nothing reads it; its memory-backed workspace lives until it goes)", () => {
    assert.equal(podStopStep(pod({ phase: 'Failed' }), RUN.uid, NOW, 'delete').action, 'delete');
    assert.equal(podStopStep(pod({ phase: 'Succeeded' }), RUN.uid, NOW, 'delete').action, 'delete');
    assert.deepEqual(podStopStep(pod({ owner: 'someone-else', phase: 'Failed' }), RUN.uid, NOW, 'delete'), {
      action: 'none',
    });
  });

  // Deleting a container under a log follower made the v1.20 kubelet write its error into the
  // followed log, which a warm run's output showed (found by the hostile tier's long lines).
  test('a served pool pod lingers LINGER_MS after it finished, while its log is followed, then is deleted', () => {
    assert.deepEqual(podStopStep(pod({ phase: 'Succeeded', finishedAgoMs: 2000 }), RUN.uid, NOW, 'linger'), {
      action: 'wait',
      recheckMs: LINGER_MS - 2000,
    });
    assert.equal(podStopStep(pod(), RUN.uid, NOW, 'linger').action, 'wait', 'not finished yet');
    const due = pod({ phase: 'Failed', finishedAgoMs: LINGER_MS });
    assert.equal(podStopStep(due, RUN.uid, NOW, 'linger').action, 'delete');
  });

  test('a deletion the kubelet has not confirmed yet is waited for (unconfirmed-deletions.ts forces it)', () => {
    assert.deepEqual(podStopStep(pod({ deletedAgoMs: 3000 }), RUN.uid, NOW), {
      action: 'wait',
      recheckMs: FORCE_DELETE_AFTER_MS - 3000,
    });
    assert.deepEqual(podStopStep(pod({ phase: 'Failed', deletedAgoMs: 60_000 }), RUN.uid, NOW), {
      action: 'wait',
      recheckMs: FORCE_DELETE_AFTER_MS,
    });
  });

  test('forceDeletionInMs counts from the end of the grace period', () => {
    assert.equal(forceDeletionInMs(pod(), NOW), undefined);
    assert.equal(forceDeletionInMs(pod({ deletedAgoMs: 3000 }), NOW), FORCE_DELETE_AFTER_MS - 3000);
    assert.equal(forceDeletionInMs(pod({ deletedAgoMs: 60_000 }), NOW), 0);
  });
});
