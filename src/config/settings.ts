/**
 * Every setting as `sandpit config` shows it: its environment variables, default, current value
 * and where that value came from. Pure. Secrets never leave: a token, a token digest or any other
 * secret prints as `<set>`.
 */
import { formatCpu, formatSize } from '../shared/quantity.js';
import { configFields, envNameFor, metaOf, schemaAt, SEED_ENV, type ResolvedConfig } from './load.js';
import { ConfigSchema, type QuantityKind } from './schema.js';

export interface Setting {
  field: string;
  /** `SANDPIT_*` first, then the seed's variable for the same field. */
  env: string[];
  default: string;
  value: string;
  /** `default`, `file PATH`, `env NAME` or `flag --NAME`. */
  source: string;
}

export const SECRET_SHOWN = '<set>';

/** Keys whose values are secrets wherever they appear (auth.token, tokens[].token, OAuth secrets, …). */
const SECRET_KEY = /token|secret|password|credential/i;

/** A value with every secret in it replaced by `<set>`. */
export function redact(key: string, value: unknown): unknown {
  if (value === undefined) return undefined;
  if (SECRET_KEY.test(key) && (typeof value === 'string' || typeof value === 'number')) return SECRET_SHOWN;
  if (Array.isArray(value)) return value.map((v) => redact('', v));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redact(k, v)]));
  }
  return value;
}

function show(field: string, value: unknown): string {
  const safe = redact(field.split('.').pop() ?? field, value);
  if (safe === undefined) return '-';
  const schema = schemaAt(field.split('.'));
  const quantity = schema && (metaOf(schema)?.quantity as QuantityKind | undefined);
  if (typeof safe === 'number' && quantity === 'size') return formatSize(safe);
  if (typeof safe === 'number' && quantity === 'cpu') return formatCpu(safe);
  return typeof safe === 'string' ? safe : JSON.stringify(safe);
}

function valueAt(obj: unknown, field: string): unknown {
  let cur = obj;
  for (const key of field.split('.')) cur = (cur as Record<string, unknown> | undefined)?.[key];
  return cur;
}

export function describeSettings(resolved: ResolvedConfig): Setting[] {
  const defaults = ConfigSchema.parse({});
  const seedFor = new Map(Object.entries(SEED_ENV).map(([name, field]) => [field, name]));
  return configFields().map((field) => {
    const seed = seedFor.get(field);
    return {
      field,
      env: seed ? [envNameFor(field), seed] : [envNameFor(field)],
      default: show(field, valueAt(defaults, field)),
      value: show(field, valueAt(resolved.config, field)),
      source: resolved.sources.get(field) ?? 'default',
    };
  });
}
