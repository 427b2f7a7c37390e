import assert from 'node:assert/strict';
import { test } from 'node:test';
import { controllerOf, ownersOf } from '../../../src/controller/children.js';

test('a session Lease routes to its Sandbox by any owner reference; children only by their controller', () => {
  const lease = {
    metadata: {
      name: 'notebook',
      namespace: 'agents',
      ownerReferences: [{ apiVersion: 'sandpit.dev/v1alpha1', kind: 'Sandbox', name: 'notebook', uid: 'u1' }],
    },
  };
  assert.deepEqual(ownersOf(lease), [
    { apiVersion: 'sandpit.dev/v1alpha1', kind: 'Sandbox', key: 'agents/notebook' },
  ]);
  assert.equal(controllerOf(lease), undefined, 'not its controller: the gateway writes it');
  const pod = {
    metadata: {
      namespace: 'agents',
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Node', name: 'n', uid: 'x' },
        {
          apiVersion: 'sandpit.dev/v1alpha1',
          kind: 'Sandbox',
          name: 'notebook',
          uid: 'u1',
          controller: true,
        },
      ],
    },
  };
  assert.deepEqual(controllerOf(pod), {
    apiVersion: 'sandpit.dev/v1alpha1',
    kind: 'Sandbox',
    key: 'agents/notebook',
  });
  assert.deepEqual(
    ownersOf({ metadata: { name: 'no-namespace', ownerReferences: pod.metadata.ownerReferences } }),
    [],
  );
});
