import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildCrd, type JsonSchema } from '../../../../src/api/v1alpha1/crd.js';
import {
  MIN_IDLE_TIMEOUT_SECONDS,
  SANDBOX_CRD,
  SandboxSchema,
  SandboxSpecSchema,
} from '../../../../src/api/v1alpha1/sandbox.js';

type Version = {
  additionalPrinterColumns: { name: string; type: string; jsonPath: string }[];
  schema: { openAPIV3Schema: JsonSchema };
};
const crd = buildCrd(SANDBOX_CRD) as {
  metadata: { name: string };
  spec: { names: { shortNames: string[]; plural: string }; versions: Version[] };
};
const version = crd.spec.versions[0]!;
const props = version.schema.openAPIV3Schema.properties as Record<string, JsonSchema>;
const specProps = props.spec!.properties as Record<string, JsonSchema>;

describe('the Sandbox CRD', () => {
  test('is sandboxes.sandpit.dev, short name sbx', () => {
    assert.equal(crd.metadata.name, 'sandboxes.sandpit.dev');
    assert.deepEqual(crd.spec.names.shortNames, ['sbx']);
  });

  test('prints phase, template, age, expires as a string and lastActivity as a date', () => {
    const col = (name: string) => version.additionalPrinterColumns.find((c) => c.name === name);
    assert.deepEqual(col('Phase'), { ...col('Phase'), type: 'string', jsonPath: '.status.phase' });
    assert.equal(col('Template')?.jsonPath, '.spec.template');
    assert.equal(col('Age')?.type, 'date');
    // kubectl prints a future date column as <invalid>.
    assert.deepEqual([col('Expires')?.type, col('Expires')?.jsonPath], ['string', '.status.expiresAt']);
    assert.deepEqual(
      [col('Last Activity')?.type, col('Last Activity')?.jsonPath],
      ['date', '.status.lastActivity'],
    );
  });

  test('the spec holds the session request without secrets, runtime spelled runtimeClassName', () => {
    for (const f of ['template', 'image', 'resources', 'ttlSeconds', 'idleTimeoutSeconds', 'env'])
      assert.ok(specProps[f], f);
    assert.equal(specProps.secrets, undefined);
    assert.equal(specProps.runtime, undefined);
    assert.ok(specProps.runtimeClassName);
    for (const f of ['ttlSecondsAfterFinished', 'pendingTimeoutSeconds', 'cancel'])
      assert.ok(specProps[f], f);
  });

  test(`an idle timeout under ${MIN_IDLE_TIMEOUT_SECONDS} s is refused, in the schema and the CRD`, () => {
    const r = SandboxSpecSchema.safeParse({ template: 'python', idleTimeoutSeconds: 59 });
    assert.equal(r.success, false);
    assert.deepEqual(r.error?.issues[0]?.path, ['idleTimeoutSeconds']);
    assert.equal(specProps.idleTimeoutSeconds!.minimum, MIN_IDLE_TIMEOUT_SECONDS);
    assert.ok(SandboxSpecSchema.safeParse({ template: 'python', idleTimeoutSeconds: 60 }).success);
  });

  test('a whole object parses, and secrets never reach a parsed spec', () => {
    const obj = {
      apiVersion: 'sandpit.dev/v1alpha1',
      kind: 'Sandbox',
      metadata: { name: 'ses-1' },
      spec: { template: 'python' },
      status: { phase: 'Ready', reason: 'Created', expiresAt: '2026-12-01T20:00:00Z' },
    };
    assert.ok(SandboxSchema.safeParse(obj).success);
    const bad = { ...obj, spec: { template: 'python', secrets: [{ name: 'A', value: 'b' }] } };
    const parsed = SandboxSchema.parse(bad);
    assert.equal('secrets' in parsed.spec, false);
  });
});
