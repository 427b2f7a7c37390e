import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import type { KubeClient } from '../../../../src/kube/client.js';
import { KubeApiError } from '../../../../src/kube/errors.js';
import type { Pod } from '../../../../src/kube/objects.js';
import { silentLogger } from '../../../../src/observability/logger.js';
import { FORCE_DELETE_AFTER_MS } from '../../../../src/controller/pod/pod-stop.js';
import { UnconfirmedDeletions } from '../../../../src/controller/pod/unconfirmed-deletions.js';

const START = Date.parse('2026-12-03T12:00:00Z');

function pod(uid: string, deletedAtMs?: number): Pod {
  return {
    metadata: {
      namespace: 'agents',
      name: `pod-${uid}`,
      uid,
      ...(deletedAtMs === undefined ? {} : { deletionTimestamp: new Date(deletedAtMs).toISOString() }),
    },
    status: { phase: 'Failed' },
  };
}

describe('UnconfirmedDeletions', () => {
  let cache: Map<string, Pod>;
  let forced: string[];
  let leading: boolean;
  let deleteError: Error | undefined;
  let deletions: UnconfirmedDeletions;

  beforeEach(() => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: START });
    cache = new Map();
    forced = [];
    leading = true;
    deleteError = undefined;
    const kube = {
      deletePod: (namespace: string, name: string, uid: string, grace?: number): Promise<void> => {
        if (deleteError) return Promise.reject(deleteError);
        forced.push(`${namespace}/${name} ${uid} grace=${grace}`);
        return Promise.resolve();
      },
    } as unknown as KubeClient;
    deletions = new UnconfirmedDeletions({
      kube,
      pods: {
        get: (_ns, name) => cache.get(name),
        list: () => [...cache.values()],
        hasSynced: () => true,
      },
      logger: silentLogger(),
      now: () => new Date(),
      acting: () => leading,
    });
  });
  afterEach(() => {
    deletions.stop();
    mock.timers.reset();
  });

  const seen = (p: Pod): void => {
    cache.set(p.metadata!.name!, p);
    deletions.observe('update', p);
  };
  const settle = () => new Promise<void>((r) => setImmediate(r));

  test('a pod still terminating FORCE_DELETE_AFTER_MS after its grace period is deleted with grace 0', async () => {
    seen(pod('a', START + 1000));
    mock.timers.tick(1000 + FORCE_DELETE_AFTER_MS - 1);
    await settle();
    assert.deepEqual(forced, []);
    mock.timers.tick(1);
    await settle();
    assert.deepEqual(forced, ['agents/pod-a a grace=0']);
  });

  test('a pod found long past its deletion is forced at once; one the kubelet removed is not', async () => {
    seen(pod('old', START - 60_000));
    seen(pod('gone', START));
    deletions.observe('delete', pod('gone', START));
    cache.delete('pod-gone');
    mock.timers.tick(0);
    await settle();
    mock.timers.tick(FORCE_DELETE_AFTER_MS);
    await settle();
    assert.deepEqual(forced, ['agents/pod-old old grace=0']);
  });

  test('a pod not being deleted, or replaced by a namesake, is left alone', async () => {
    seen(pod('live'));
    seen(pod('first', START));
    cache.set('pod-first', pod('second', START));
    mock.timers.tick(2 * FORCE_DELETE_AFTER_MS);
    await settle();
    assert.deepEqual(forced, []);
  });

  test('a follower does not force; it looks again and forces once it leads', async () => {
    leading = false;
    seen(pod('a', START));
    mock.timers.tick(FORCE_DELETE_AFTER_MS);
    await settle();
    assert.deepEqual(forced, []);
    leading = true;
    mock.timers.tick(FORCE_DELETE_AFTER_MS);
    await settle();
    assert.deepEqual(forced, ['agents/pod-a a grace=0']);
  });

  test('a failed force is tried again; NotFound ends it', async () => {
    deleteError = new Error('apiserver unavailable');
    seen(pod('a', START));
    mock.timers.tick(FORCE_DELETE_AFTER_MS);
    await settle();
    deleteError = undefined;
    mock.timers.tick(FORCE_DELETE_AFTER_MS);
    await settle();
    assert.deepEqual(forced, ['agents/pod-a a grace=0']);
    deleteError = new KubeApiError('delete Pod agents/pod-b: not found', {
      code: 'NOT_FOUND',
      status: 404,
      reason: 'NotFound',
    });
    seen(pod('b', START + FORCE_DELETE_AFTER_MS));
    mock.timers.tick(FORCE_DELETE_AFTER_MS);
    await settle();
    mock.timers.tick(FORCE_DELETE_AFTER_MS);
    await settle();
    assert.deepEqual(forced, ['agents/pod-a a grace=0']);
  });
});
