/**
 * buildCrd(): the SandboxRun CustomResourceDefinition, generated from the zod schemas. Pure.
 * `toStructuralSchema()` turns zod's OpenAPI 3.0 output into a structural schema that the
 * apiserver accepts from v1.20 on (no CEL): no `additionalProperties: false`, a type on every
 * node, quantities as int-or-string, and nothing the generator does not understand.
 */
import * as z from 'zod';
import {
  API_VERSION,
  GROUP,
  KIND,
  LIST_KIND,
  PLURAL,
  SandboxRunSpecSchema,
  SandboxRunStatusSchema,
  SHORT_NAMES,
  SINGULAR,
  VERSION,
} from './sandboxrun.js';

export type JsonSchema = { [key: string]: unknown };

export const CRD_NAME = `${PLURAL}.${GROUP}`;
export const CRD_FILE = `crds/${CRD_NAME}.yaml`;

const NUMERIC_BOUND = Number.MAX_SAFE_INTEGER;

/** Keys a structural schema node may carry (besides the x-kubernetes-* extensions). */
const ALLOWED_KEYS = new Set([
  'type',
  'description',
  'properties',
  'required',
  'items',
  'additionalProperties',
  'enum',
  'pattern',
  'format',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minItems',
  'maxItems',
  'default',
  'nullable',
]);

const SCALARS = new Set(['string', 'number', 'integer']);

/**
 * Rewrites one zod OpenAPI 3.0 schema into a structural schema, or throws naming the path of
 * anything the apiserver would refuse (so a schema change that cannot be expressed fails the
 * generator, not the cluster).
 */
export function toStructuralSchema(schema: JsonSchema, path = '$'): JsonSchema {
  const out: JsonSchema = {};
  if (Array.isArray(schema.anyOf)) return intOrString(schema, path);
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$schema') continue;
    if (key === 'additionalProperties' && value === false) continue;
    if (key === 'uniqueItems') throw new Error(`${path}: uniqueItems is not allowed in a structural schema`);
    if (key.startsWith('x-kubernetes-')) {
      out[key] = value;
      continue;
    }
    if (!ALLOWED_KEYS.has(key)) throw new Error(`${path}: "${key}" has no structural equivalent`);
    if ((key === 'minimum' || key === 'maximum') && Math.abs(value as number) === NUMERIC_BOUND) continue;
    if (key === 'properties') {
      out.properties = Object.fromEntries(
        Object.entries(value as Record<string, JsonSchema>).map(([k, v]) => [
          k,
          toStructuralSchema(v, `${path}.${k}`),
        ]),
      );
    } else if (key === 'items') {
      if (Array.isArray(value)) throw new Error(`${path}: tuple items are not allowed`);
      out.items = toStructuralSchema(value as JsonSchema, `${path}[]`);
    } else if (key === 'additionalProperties') {
      out.additionalProperties = toStructuralSchema(value as JsonSchema, `${path}.*`);
    } else {
      out[key] = value;
    }
  }
  if (typeof out.type !== 'string') throw new Error(`${path}: every node needs a type`);
  if (out.type === 'object' && out.properties && out.additionalProperties) {
    throw new Error(`${path}: properties and additionalProperties are mutually exclusive`);
  }
  return out;
}

/** `anyOf: [string, number]` (a quantity such as `512Mi` or `1`) becomes `x-kubernetes-int-or-string`. */
function intOrString(schema: JsonSchema, path: string): JsonSchema {
  const types = (schema.anyOf as JsonSchema[]).map((s) => s.type);
  const extra = (schema.anyOf as JsonSchema[]).some((s) => Object.keys(s).some((k) => k !== 'type'));
  if (extra || !types.every((t) => typeof t === 'string' && SCALARS.has(t)) || !types.includes('string')) {
    throw new Error(`${path}: only a string-or-number union can be expressed (as int-or-string)`);
  }
  const out: JsonSchema = { 'x-kubernetes-int-or-string': true };
  if (typeof schema.description === 'string') out.description = schema.description;
  out.anyOf = [{ type: 'integer' }, { type: 'string' }];
  return out;
}

function openApi(schema: z.ZodType): JsonSchema {
  return toStructuralSchema(
    z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'throw' }),
  );
}

const printerColumns = [
  { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Lifecycle phase of the run' },
  { name: 'Reason', type: 'string', jsonPath: '.status.reason', description: 'Why the run is in its phase' },
  {
    name: 'Exit Code',
    type: 'integer',
    jsonPath: '.status.exitCode',
    description: 'Exit code of the program',
  },
  {
    name: 'Pod',
    type: 'string',
    jsonPath: '.status.podName',
    priority: 1,
    description: 'The pod of the run',
  },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

/** The CustomResourceDefinition of SandboxRun (apiextensions.k8s.io/v1). */
export function buildCrd(): JsonSchema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: CRD_NAME, labels: { 'app.kubernetes.io/part-of': 'sandpit' } },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        plural: PLURAL,
        singular: SINGULAR,
        kind: KIND,
        listKind: LIST_KIND,
        shortNames: [...SHORT_NAMES],
        categories: ['sandpit'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: `SandboxRun (${API_VERSION}) runs untrusted code once in a locked-down pod and records the outcome.`,
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string', description: 'APIVersion of this object' },
                kind: { type: 'string', description: 'Kind of this object' },
                metadata: { type: 'object' },
                spec: { ...openApi(SandboxRunSpecSchema), description: 'What to run, and with which limits' },
                status: {
                  ...openApi(SandboxRunStatusSchema),
                  description: 'What happened, written by the operator',
                },
              },
            },
          },
        },
      ],
    },
  };
}
