import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Pod } from '../../../../../src/kube/objects.js';
import {
  ownershipProblem,
  sandboxFailure,
  type SandboxObject,
} from '../../../../../src/backends/kubernetes/sessions/sandbox-checks.js';

const sandbox: SandboxObject = {
  metadata: {
    name: 'ses-1',
    namespace: 'ns',
    uid: 'uid-1',
    labels: { 'sandpit.dev/managed-by': 'sandpit-gateway' },
    annotations: { 'sandpit.dev/principal': 'alice' },
  },
  status: { phase: 'Ready', podName: 'ses-1-abcde' },
};
const pod = (over: Partial<NonNullable<Pod['metadata']>> = {}): Pod => ({
  metadata: {
    name: 'ses-1-abcde',
    namespace: 'ns',
    ownerReferences: [
      { apiVersion: 'sandpit.dev/v1alpha1', kind: 'Sandbox', name: 'ses-1', uid: 'uid-1', controller: true },
    ],
    ...over,
  },
});

describe('the ownership check before attaching', () => {
  test("the Sandbox's own pod passes", () => {
    assert.equal(ownershipProblem(sandbox, pod(), 'alice'), undefined);
  });
  test('refused: another pod than the status names, another controller, no controller, a namesake Sandbox', () => {
    assert.match(ownershipProblem(sandbox, pod({ name: 'other' }), 'alice') ?? '', /not the pod/);
    assert.match(ownershipProblem(sandbox, pod({ ownerReferences: [] }), 'alice') ?? '', /not controlled/);
    const notController = [
      { apiVersion: 'sandpit.dev/v1alpha1', kind: 'Sandbox', name: 'ses-1', uid: 'uid-1' },
    ];
    assert.match(
      ownershipProblem(sandbox, pod({ ownerReferences: notController }), 'alice') ?? '',
      /not controlled/,
    );
    const oldUid = [
      { apiVersion: 'sandpit.dev/v1alpha1', kind: 'Sandbox', name: 'ses-1', uid: 'uid-0', controller: true },
    ];
    assert.match(
      ownershipProblem(sandbox, pod({ ownerReferences: oldUid }), 'alice') ?? '',
      /not controlled/,
    );
    const byDeployment = [
      { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'ses-1', uid: 'uid-1', controller: true },
    ];
    assert.match(
      ownershipProblem(sandbox, pod({ ownerReferences: byDeployment }), 'alice') ?? '',
      /not controlled/,
    );
  });
  test("refused: a Sandbox sandpit's gateway did not make, or another principal's", () => {
    const kubectlMade = { ...sandbox, metadata: { ...sandbox.metadata, labels: {} } };
    assert.match(ownershipProblem(kubectlMade, pod(), 'alice') ?? '', /not made by sandpit/);
    assert.match(ownershipProblem(sandbox, pod(), 'mallory') ?? '', /another principal/);
  });
});

describe('a Sandbox that failed before Ready reads as the typed error Docker gives', () => {
  test('reasons to codes', () => {
    assert.equal(sandboxFailure({ phase: 'Failed', reason: 'ImageNotFound' }, 'x:1').code, 'IMAGE_NOT_FOUND');
    assert.equal(sandboxFailure({ phase: 'Failed', reason: 'PolicyDenied' }, 'x:1').code, 'POLICY_DENIED');
    assert.equal(sandboxFailure({ phase: 'Failed', reason: 'Unschedulable' }, 'x:1').code, 'BUSY');
    assert.equal(sandboxFailure({ phase: 'Failed', reason: 'PendingTimeout' }, 'x:1').code, 'BUSY');
    assert.equal(
      sandboxFailure(
        { phase: 'Failed', reason: 'BackendError', message: 'RuntimeClass "kata" not found' },
        'x',
      ).code,
      'RUNTIME_NOT_FOUND',
    );
    assert.equal(sandboxFailure({ phase: 'Failed', reason: 'BackendError' }, 'x').code, 'BACKEND_ERROR');
  });
});
