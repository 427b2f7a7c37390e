/**
 * buildCrd(): a kind's CustomResourceDefinition, generated from its zod schemas. Pure.
 * `toStructuralSchema()` turns zod's OpenAPI 3.0 output into a structural schema that the
 * apiserver accepts from v1.20 on (no CEL): no `additionalProperties: false`, a type on every
 * node, quantities as int-or-string, and nothing the generator does not understand.
 */
import * as z from 'zod';
import { crdName, type CustomKind } from './group.js';

export type JsonSchema = { [key: string]: unknown };

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
  if (Array.isArray(schema.anyOf)) return intOrString(schema, path);
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (dropped(key, value, path)) continue;
    out[key] = structuralValue(key, value, path);
  }
  if (typeof out.type !== 'string') throw new Error(`${path}: every node needs a type`);
  if (out.type === 'object' && out.properties && out.additionalProperties) {
    throw new Error(`${path}: properties and additionalProperties are mutually exclusive`);
  }
  return out;
}

/** Keys zod writes that a structural schema leaves out; throws on those it cannot express. */
function dropped(key: string, value: unknown, path: string): boolean {
  if (key === '$schema') return true;
  if (key === 'additionalProperties' && value === false) return true;
  if (key === 'uniqueItems') throw new Error(`${path}: uniqueItems is not allowed in a structural schema`);
  if (key.startsWith('x-kubernetes-')) return false;
  if (!ALLOWED_KEYS.has(key)) throw new Error(`${path}: "${key}" has no structural equivalent`);
  return (key === 'minimum' || key === 'maximum') && Math.abs(value as number) === NUMERIC_BOUND;
}

/** One key's value, with nested schemas rewritten. */
function structuralValue(key: string, value: unknown, path: string): unknown {
  if (key === 'properties') {
    return Object.fromEntries(
      Object.entries(value as Record<string, JsonSchema>).map(([k, v]) => [
        k,
        toStructuralSchema(v, `${path}.${k}`),
      ]),
    );
  }
  if (key === 'items') {
    if (Array.isArray(value)) throw new Error(`${path}: tuple items are not allowed`);
    return toStructuralSchema(value as JsonSchema, `${path}[]`);
  }
  if (key === 'additionalProperties') return toStructuralSchema(value as JsonSchema, `${path}.*`);
  return value;
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

/** A `kubectl get` column (CRD additionalPrinterColumns). */
export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  priority?: number;
}

/** What a CRD is made of: the kind's names, a description, the spec and status schemas, and columns. */
export interface CrdDefinition {
  kind: CustomKind;
  description: string;
  spec: { schema: z.ZodType; description: string };
  status: { schema: z.ZodType; description: string };
  columns: readonly PrinterColumn[];
  /** The /scale subresource's paths, for kinds an autoscaler may size. */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath: string };
}

/** The CustomResourceDefinition of one kind (apiextensions.k8s.io/v1), namespaced, with a status (and optionally a scale) subresource. */
export function buildCrd(def: CrdDefinition): JsonSchema {
  const { kind } = def;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: crdName(kind), labels: { 'app.kubernetes.io/part-of': 'sandpit' } },
    spec: {
      group: kind.group,
      scope: 'Namespaced',
      names: {
        plural: kind.plural,
        singular: kind.singular,
        kind: kind.kind,
        listKind: kind.listKind,
        shortNames: [...kind.shortNames],
        categories: ['sandpit'],
      },
      versions: [
        {
          name: kind.version,
          served: true,
          storage: true,
          subresources: { status: {}, ...(def.scale ? { scale: { ...def.scale } } : {}) },
          additionalPrinterColumns: def.columns.map((c) => ({ ...c })),
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: def.description,
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string', description: 'APIVersion of this object' },
                kind: { type: 'string', description: 'Kind of this object' },
                metadata: { type: 'object' },
                spec: { ...openApi(def.spec.schema), description: def.spec.description },
                status: { ...openApi(def.status.schema), description: def.status.description },
              },
            },
          },
        },
      ],
    },
  };
}
