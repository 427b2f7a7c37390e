import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  buildNamespacePolicy,
  isNamespacePolicyIntact,
} from '../../../../src/controller/pod/namespace-policy.js';

describe('the namespace-wide deny-all NetworkPolicy', () => {
  const want = buildNamespacePolicy('agents');

  test('selects every pod the operator makes, denies both directions, has no rules', () => {
    assert.equal(want.metadata?.name, 'sandpit-deny-all');
    assert.equal(want.metadata?.namespace, 'agents');
    assert.equal(
      want.metadata?.labels?.['sandpit.dev/managed-by'],
      'sandpit-operator',
      'the informer sees it',
    );
    assert.equal(want.metadata?.ownerReferences, undefined, 'it outlives any one owner');
    assert.deepEqual(want.spec, {
      podSelector: { matchLabels: { 'sandpit.dev/managed-by': 'sandpit-operator' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    });
  });

  test('intact as made, or as the apiserver returns it (empty lists dropped)', () => {
    assert.equal(isNamespacePolicyIntact(want, want), true);
    const served = {
      ...want,
      spec: { podSelector: want.spec?.podSelector, policyTypes: ['Egress', 'Ingress'] },
    };
    assert.equal(isNamespacePolicyIntact(served, want), true);
  });

  test('not intact when a rule, the selector, a policy type or its label changed', () => {
    const edits = [
      { ...want, spec: { ...want.spec!, ingress: [{}] } },
      { ...want, spec: { ...want.spec!, egress: [{}] } },
      { ...want, spec: { ...want.spec!, podSelector: { matchLabels: { app: 'x' } } } },
      { ...want, spec: { ...want.spec!, policyTypes: ['Ingress'] } },
      { ...want, metadata: { ...want.metadata, labels: {} } },
    ];
    for (const edited of edits)
      assert.equal(isNamespacePolicyIntact(edited, want), false, JSON.stringify(edited));
  });
});
