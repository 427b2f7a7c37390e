import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildCrd, type JsonSchema } from '../../../../src/api/v1alpha1/crd.js';
import {
  MAX_POOL_REPLICAS,
  SANDBOX_POOL_CRD,
  SandboxPoolSpecSchema,
} from '../../../../src/api/v1alpha1/sandboxpool.js';

type Version = {
  additionalPrinterColumns: { name: string; type: string; jsonPath: string }[];
  subresources: { status: object; scale?: Record<string, string> };
  schema: { openAPIV3Schema: JsonSchema };
};
const crd = buildCrd(SANDBOX_POOL_CRD) as {
  metadata: { name: string };
  spec: { names: { shortNames: string[] }; versions: Version[] };
};
const version = crd.spec.versions[0]!;
const props = version.schema.openAPIV3Schema.properties as Record<string, JsonSchema>;
const specProps = props.spec!.properties as Record<string, JsonSchema>;

describe('the SandboxPool CRD', () => {
  test('is sandboxpools.sandpit.dev, short name sbp', () => {
    assert.equal(crd.metadata.name, 'sandboxpools.sandpit.dev');
    assert.deepEqual(crd.spec.names.shortNames, ['sbp']);
  });

  test('has the /scale subresource on spec.replicas, status.replicas and status.selector', () => {
    assert.deepEqual(version.subresources.scale, {
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.selector',
    });
    assert.deepEqual(version.subresources.status, {});
  });

  test('prints mode, template, desired, ready, starting and claimed', () => {
    const paths = Object.fromEntries(version.additionalPrinterColumns.map((c) => [c.name, c.jsonPath]));
    assert.deepEqual(paths, {
      Mode: '.spec.mode',
      Template: '.spec.template',
      Desired: '.spec.replicas',
      Ready: '.status.readyReplicas',
      Starting: '.status.startingReplicas',
      Claimed: '.status.claimedReplicas',
      Age: '.metadata.creationTimestamp',
    });
  });

  test('the spec names a shape the way a run does, with mode, replicas and maxIdleSeconds', () => {
    for (const f of [
      'template',
      'image',
      'resources',
      'runtimeClassName',
      'mode',
      'replicas',
      'maxIdleSeconds',
    ])
      assert.ok(specProps[f], f);
    assert.deepEqual(specProps.mode!.enum, ['run', 'session']);
    assert.equal(specProps.replicas!.maximum, MAX_POOL_REPLICAS);
  });

  test('defaults: mode run, no egress, one replica, an hour of idleness', () => {
    const spec = SandboxPoolSpecSchema.parse({ template: 'python' });
    assert.deepEqual(spec, {
      template: 'python',
      egress: 'none',
      mode: 'run',
      replicas: 1,
      maxIdleSeconds: 3600,
    });
  });

  test('refuses a pool with neither template nor image, unknown fields and too many replicas', () => {
    const path = (input: unknown) => SandboxPoolSpecSchema.safeParse(input).error?.issues[0]?.path;
    assert.deepEqual(path({ replicas: 2 }), ['template']);
    assert.deepEqual(path({ template: 'python', replicas: MAX_POOL_REPLICAS + 1 }), ['replicas']);
    assert.deepEqual(path({ template: 'python', mode: 'batch' }), ['mode']);
    assert.equal(SandboxPoolSpecSchema.safeParse({ template: 'python', code: 'x' }).success, false);
  });
});
