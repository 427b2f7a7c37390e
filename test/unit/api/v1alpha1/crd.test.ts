import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { buildCrd, toStructuralSchema, type JsonSchema } from '../../../../src/api/v1alpha1/crd.js';
import {
  CRD_DIRS,
  CRDS,
  crdFileName,
  generatedCrdFiles,
  renderCrdYaml,
} from '../../../../src/api/v1alpha1/render.js';
import { SANDBOX_RUN_CRD } from '../../../../src/api/v1alpha1/sandboxrun.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

type Version = {
  name: string;
  subresources: unknown;
  additionalPrinterColumns: { name: string; type: string; jsonPath: string }[];
  schema: { openAPIV3Schema: JsonSchema };
};
const crd = buildCrd(SANDBOX_RUN_CRD) as {
  spec: { names: Record<string, unknown>; scope: string; versions: Version[] };
};
const version = crd.spec.versions[0]!;
const root = version.schema.openAPIV3Schema;
const props = root.properties as Record<string, JsonSchema>;
const spec = props.spec!;
const status = props.status!;

/** Calls fn on every schema node with its path. */
function walk(node: JsonSchema, at: string, fn: (node: JsonSchema, at: string) => void): void {
  fn(node, at);
  for (const [k, v] of Object.entries((node.properties as Record<string, JsonSchema> | undefined) ?? {}))
    walk(v, `${at}.${k}`, fn);
  if (node.items) walk(node.items as JsonSchema, `${at}[]`, fn);
  if (typeof node.additionalProperties === 'object')
    walk(node.additionalProperties as JsonSchema, `${at}.*`, fn);
}

describe('the generated CRDs', () => {
  for (const f of generatedCrdFiles()) {
    test(`${f.path} is what npm run gen:crd writes (no drift)`, () => {
      assert.equal(readFileSync(path.join(ROOT, f.path), 'utf8'), f.text);
    });
  }

  test('every CRD folder (crds/ and the chart’s) holds exactly one file per kind', () => {
    const want = CRDS.map(crdFileName).sort();
    assert.ok(want.length > 0);
    for (const dir of CRD_DIRS) assert.deepEqual(readdirSync(path.join(ROOT, dir)).sort(), want, dir);
  });

  test('each file parses back to buildCrd()', () => {
    for (const def of CRDS) assert.deepEqual(parse(renderCrdYaml(def)), buildCrd(def), crdFileName(def));
  });
});

describe('the SandboxRun CRD', () => {
  test('names: sandboxruns.sandpit.dev, kind SandboxRun, short name sbr, namespaced', () => {
    assert.deepEqual(crd.spec.names, {
      plural: 'sandboxruns',
      singular: 'sandboxrun',
      kind: 'SandboxRun',
      listKind: 'SandboxRunList',
      shortNames: ['sbr'],
      categories: ['sandpit'],
    });
    assert.equal(crd.spec.scope, 'Namespaced');
    assert.equal(version.name, 'v1alpha1');
    assert.deepEqual(version.subresources, { status: {} });
  });

  test('printer columns: phase, reason, exit code, age', () => {
    const cols = version.additionalPrinterColumns.map((c) => [c.name, c.type, c.jsonPath]);
    assert.deepEqual(
      cols.filter((c) => c[0] !== 'Pod'),
      [
        ['Phase', 'string', '.status.phase'],
        ['Reason', 'string', '.status.reason'],
        ['Exit Code', 'integer', '.status.exitCode'],
        ['Age', 'date', '.metadata.creationTimestamp'],
      ],
    );
  });

  test('structural: every node typed, no additionalProperties: false, no CEL, no unions but int-or-string', () => {
    walk(root, '$', (node, at) => {
      if (node['x-kubernetes-int-or-string'] === true) {
        assert.deepEqual(node.anyOf, [{ type: 'integer' }, { type: 'string' }], at);
        return;
      }
      assert.equal(typeof node.type, 'string', `${at} has no type`);
      assert.notEqual(node.additionalProperties, false, at);
      for (const k of [
        'anyOf',
        'oneOf',
        'allOf',
        'not',
        'x-kubernetes-validations',
        '$ref',
        '$schema',
        'uniqueItems',
        'const',
      ]) {
        assert.ok(!(k in node), `${at} has ${k}`);
      }
      if (typeof node.maximum === 'number') assert.ok(Math.abs(node.maximum) < Number.MAX_SAFE_INTEGER, at);
    });
  });

  test('spec: the shared run request fields, runtime renamed runtimeClassName, plus the lifecycle fields', () => {
    assert.deepEqual(Object.keys(spec.properties as object).sort(), [
      'cancel',
      'code',
      'command',
      'env',
      'files',
      'image',
      'network',
      'outputs',
      'pendingTimeoutSeconds',
      'resources',
      'runtimeClassName',
      'stdin',
      'template',
      'timeoutSeconds',
      'ttlSecondsAfterFinished',
    ]);
    const resources = (spec.properties as Record<string, JsonSchema>).resources!;
    const cpu = (resources.properties as Record<string, JsonSchema>).cpu!;
    assert.equal(cpu['x-kubernetes-int-or-string'], true);
  });

  test('status: phase and reason enums are the shared ones; conditions are a map keyed by type', () => {
    const s = status.properties as Record<string, JsonSchema>;
    assert.deepEqual(Object.keys(s).sort(), [
      'completionTime',
      'conditions',
      'exitCode',
      'message',
      'observedGeneration',
      'output',
      'outputs',
      'phase',
      'podName',
      'pool',
      'reason',
      'served',
      'startTime',
    ]);
    assert.deepEqual(s.phase!.enum, [
      'Pending',
      'Running',
      'Succeeded',
      'Failed',
      'TimedOut',
      'Rejected',
      'Cancelled',
    ]);
    assert.ok((s.reason!.enum as string[]).includes('RuntimeClassNotFound'));
    assert.equal(s.conditions!['x-kubernetes-list-type'], 'map');
    assert.deepEqual(s.conditions!['x-kubernetes-list-map-keys'], ['type']);
    const cond = s.conditions!.items as JsonSchema;
    assert.ok((cond.required as string[]).includes('type'));
    assert.ok('observedGeneration' in (cond.properties as object));
    assert.deepEqual(Object.keys(s.output!.properties as object).sort(), ['bytes', 'tail', 'truncated']);
  });
});

describe('toStructuralSchema', () => {
  test('drops additionalProperties: false and $schema, keeps x-kubernetes-* extensions', () => {
    assert.deepEqual(
      toStructuralSchema({
        $schema: 'x',
        type: 'object',
        additionalProperties: false,
        'x-kubernetes-list-type': 'atomic',
      }),
      { type: 'object', 'x-kubernetes-list-type': 'atomic' },
    );
  });

  test('a string-or-number union becomes int-or-string', () => {
    assert.deepEqual(
      toStructuralSchema({ description: 'q', anyOf: [{ type: 'string' }, { type: 'number' }] }),
      {
        'x-kubernetes-int-or-string': true,
        description: 'q',
        anyOf: [{ type: 'integer' }, { type: 'string' }],
      },
    );
  });

  test('drops the ±MAX_SAFE_INTEGER bounds zod adds to integers', () => {
    assert.deepEqual(
      toStructuralSchema({
        type: 'integer',
        minimum: -Number.MAX_SAFE_INTEGER,
        maximum: Number.MAX_SAFE_INTEGER,
      }),
      {
        type: 'integer',
      },
    );
  });

  const refused: [string, JsonSchema, RegExp][] = [
    ['an untyped node', { description: 'x' }, /needs a type/],
    ['uniqueItems', { type: 'array', items: { type: 'string' }, uniqueItems: true }, /uniqueItems/],
    ['a union of objects', { anyOf: [{ type: 'object' }, { type: 'string' }] }, /int-or-string/],
    ['a keyword with no structural form', { type: 'string', const: 'a' }, /"const"/],
    [
      'properties with additionalProperties',
      { type: 'object', properties: {}, additionalProperties: { type: 'string' } },
      /mutually exclusive/,
    ],
  ];
  for (const [name, schema, message] of refused) {
    test(`refuses ${name}, naming the path`, () => {
      assert.throws(
        () => toStructuralSchema({ type: 'object', properties: { f: schema } }),
        (e: Error) => {
          assert.match(e.message, /^\$\.f/);
          assert.match(e.message, message);
          return true;
        },
      );
    });
  }
});
