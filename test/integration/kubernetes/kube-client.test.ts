// src/kube/client.ts against the real apiserver: delete options reach it. (With a DeleteOptions body
// the apiserver ignores query parameters, so a grace period or propagation policy sent there is
// silently dropped: a "forced" delete would wait on a kubelet that never confirms.)
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { createKubeClient } from '../../../src/kube/client.js';
import { KubeApiError } from '../../../src/kube/errors.js';
import { isNotFound, kubeTest } from '../../support/kube/index.js';

/** A pod bound to a node that does not exist: no kubelet will ever confirm its deletion. */
function orphanPod(name: string): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { 'sandpit.dev/test': 'kube-client' } },
    spec: {
      nodeName: 'sandpit-no-such-node',
      terminationGracePeriodSeconds: 300,
      automountServiceAccountToken: false,
      containers: [{ name: 'c', image: 'sandpit/python:3.11' }],
    },
  };
}

describe('kube client deletes', () => {
  test(
    'deletePod: a graceful delete waits for the kubelet, grace 0 removes the pod at once',
    { timeout: 60_000 },
    kubeTest(async ({ cluster, ns }) => {
      const kube = createKubeClient(cluster.kc);
      const created = await cluster.core.createNamespacedPod({ namespace: ns, body: orphanPod('orphan') });
      const uid = created.metadata?.uid ?? '';

      await kube.deletePod(ns, 'orphan', uid, 30);
      const terminating = await cluster.core.readNamespacedPod({ namespace: ns, name: 'orphan' });
      assert.ok(terminating.metadata?.deletionTimestamp, 'the graceful delete marks the pod');
      assert.equal(terminating.metadata?.deletionGracePeriodSeconds, 30, 'the grace period sent is used');

      await kube.deletePod(ns, 'orphan', uid, 0);
      await assert.rejects(
        cluster.core.readNamespacedPod({ namespace: ns, name: 'orphan' }),
        (e: unknown) => isNotFound(e),
        'grace 0 deletes the pod object without the kubelet',
      );
    }),
  );

  test(
    'deletePod: the uid precondition spares a namesake',
    { timeout: 60_000 },
    kubeTest(async ({ cluster, ns }) => {
      const kube = createKubeClient(cluster.kc);
      await cluster.core.createNamespacedPod({ namespace: ns, body: orphanPod('namesake') });
      await assert.rejects(
        kube.deletePod(ns, 'namesake', '00000000-0000-0000-0000-000000000000', 0),
        (e: unknown) => e instanceof KubeApiError && e.status === 409,
        'a uid precondition that does not hold is a Conflict',
      );
      const still = await cluster.core.readNamespacedPod({ namespace: ns, name: 'namesake' });
      assert.equal(still.metadata?.deletionTimestamp, undefined, 'the other pod is untouched');
      await kube.deletePod(ns, 'namesake', still.metadata?.uid ?? '', 0);
    }),
  );
});
