/**
 * loadConfig: defaults ← config file (`--config` / SANDPIT_CONFIG, YAML or JSON) ← the seed's
 * environment variables ← `SANDPIT_*` environment variables ← command-line flags. Every error names the field, where the
 * value came from, and the accepted form.
 */
import { readFileSync } from 'node:fs';
import { distance } from 'fastest-levenshtein';
import { parse as parseYaml } from 'yaml';
import * as z from 'zod';
import { AppError } from '../shared/errors.js';
import { ConfigSchema, type Config } from './schema.js';

/** The seed servers' documented variables, and the config field each one sets. */
export const SEED_ENV: Readonly<Record<string, string>> = {
  MCP_PORT: 'server.port',
  MCP_AUTH_TOKEN: 'auth.token',
  SANDBOX_IMAGE_ALLOWLIST: 'sandbox.imageAllowlist',
  MAX_CONTAINER_CPU: 'sandbox.maxCpu',
  MAX_CONTAINER_MEMORY: 'sandbox.maxMemory',
  CONTAINER_TIMEOUT_SECONDS: 'sandbox.timeoutSeconds',
  DISABLE_NETWORK: 'sandbox.disableNetwork',
};

const SECRET_FIELDS = new Set(['auth.token', 'auth.tokens']);

/** Every leaf field of the schema, as a dotted path (`sandbox.maxMemory`). */
export function configFields(): string[] {
  const out: string[] = [];
  const walk = (schema: z.ZodType, path: string[]): void => {
    const inner = unwrap(schema);
    if (inner instanceof z.ZodObject) {
      const shape: Record<string, z.ZodType> = inner.shape;
      for (const [key, child] of Object.entries(shape)) walk(child, [...path, key]);
    } else {
      out.push(path.join('.'));
    }
  };
  walk(ConfigSchema, []);
  return out;
}

function unwrap(schema: z.ZodType): z.ZodType {
  let s: z.ZodType = schema;
  for (;;) {
    const def = s._zod.def as { innerType?: z.ZodType };
    if (!def.innerType || s instanceof z.ZodObject) return s;
    s = def.innerType;
  }
}

/** `sandbox.maxMemory` → `SANDPIT_SANDBOX_MAX_MEMORY`. */
export function envNameFor(field: string): string {
  return `SANDPIT_${field
    .split('.')
    .map((p) => p.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase())
    .join('_')}`;
}

/** Settings that moved, old name → new name: the old one still works, with a warning naming the new one. */
export const RENAMED: Readonly<Record<string, string>> = {
  ...Object.fromEntries(
    [
      'namespaces',
      'imagePullPolicy',
      'ttlSecondsAfterFinished',
      'cpuRequest',
      'memoryRequest',
      'startGraceSeconds',
      'outputTailBytes',
      'outputReadBytes',
      'workers',
      'watchTimeoutSeconds',
      'resyncSeconds',
      'leaderElection',
      'leaseName',
      'leaseNamespace',
      'leaseDurationSeconds',
      'renewDeadlineSeconds',
      'retryPeriodSeconds',
      'probeHost',
      'probePort',
    ].map((key) => [`kubernetes.${key}`, `kubernetes.operator.${key}`]),
  ),
  'kubernetes.kubeconfig': 'kubernetes.gateway.kubeconfig',
  'kubernetes.gatewayNamespace': 'kubernetes.gateway.namespace',
  'kubernetes.gatewayTtlSecondsAfterFinished': 'kubernetes.gateway.ttlSecondsAfterFinished',
  'kubernetes.gatewayAdmitTimeoutSeconds': 'kubernetes.gateway.pickupTimeoutSeconds',
};

/** A command-line flag that sets a config field; it wins over the file and the environment. */
export interface FlagSetting {
  field: string;
  flag: string;
  value: string;
}

export interface LoadOptions {
  env?: Readonly<Record<string, string | undefined>>;
  configPath?: string;
  flags?: readonly FlagSetting[];
  /** Receives a line for each deprecated setting in use (the caller logs them). */
  warnings?: string[];
}

type Env = Readonly<Record<string, string | undefined>>;

/** The raw settings as they are gathered, with where each came from. */
class Gathered {
  readonly raw: Record<string, unknown> = {};
  readonly sources = new Map<string, string>();
  private readonly env: Env;

  constructor(env: Env) {
    this.env = env;
  }

  file(path: string, warnings: string[]): void {
    const fromFile = readConfigFile(path);
    for (const [old, renamed] of Object.entries(RENAMED)) {
      const value = getPath(fromFile, old);
      if (value === undefined) continue;
      warnings.push(`${old} (in ${path}) is deprecated: use ${renamed}`);
      deletePath(fromFile, old);
      if (getPath(fromFile, renamed) === undefined) setPath(fromFile, renamed, value);
    }
    for (const field of configFields()) {
      if (getPath(fromFile, field) !== undefined) this.sources.set(field, `file ${path}`);
    }
    Object.assign(this.raw, fromFile);
  }

  /** The variable `name`, when set, as `field`. */
  variable(name: string, field: string): boolean {
    const value = this.env[name];
    if (value === undefined || value === '') return false;
    setPath(this.raw, field, value);
    this.sources.set(field, `env ${name}`);
    return true;
  }

  flag({ field, flag, value }: FlagSetting): void {
    setPath(this.raw, field, value);
    this.sources.set(field, `flag ${flag}`);
  }
}

export function loadConfig(options: LoadOptions = {}): Config {
  return resolveConfig(options).config;
}

/** A loaded config, and where each field that is not a default came from (`env MCP_PORT`, …). */
export interface ResolvedConfig {
  config: Config;
  sources: ReadonlyMap<string, string>;
}

export function resolveConfig(options: LoadOptions = {}): ResolvedConfig {
  const env = options.env ?? {};
  const warnings = options.warnings ?? [];
  const gathered = new Gathered(env);
  const configPath = options.configPath ?? env.SANDPIT_CONFIG;
  if (configPath) gathered.file(configPath, warnings);
  for (const [name, field] of Object.entries(SEED_ENV)) gathered.variable(name, field);
  for (const [old, renamed] of Object.entries(RENAMED)) {
    const [was, is] = [envNameFor(old), envNameFor(renamed)];
    // Some moves keep their variable's name (kubernetes.gatewayNamespace → kubernetes.gateway.namespace).
    if (was !== is && gathered.variable(was, renamed)) warnings.push(`${was} is deprecated: use ${is}`);
  }
  for (const field of configFields()) gathered.variable(envNameFor(field), field);
  for (const flag of options.flags ?? []) gathered.flag(flag);

  const { raw, sources } = gathered;
  const result = ConfigSchema.safeParse(raw);
  if (result.success) return { config: result.data, sources };
  const fileSource = configPath ? `file ${configPath}` : undefined;
  const lines = result.error.issues.map((issue) => describeIssue(issue, { raw, sources, fileSource }));
  throw new AppError('CONFIG_INVALID', `invalid configuration:\n  ${lines.join('\n  ')}`, {
    hint: 'fix the named settings; `sandpit config` lists every setting, its environment variable and default',
  });
}

function describeIssue(
  issue: z.core.$ZodIssue,
  {
    raw,
    sources,
    fileSource,
  }: { raw: Record<string, unknown>; sources: Map<string, string>; fileSource: string | undefined },
): string {
  const field = issue.path.map(String).join('.');
  const leaf = [...sources.keys()].find((f) => field === f || field.startsWith(`${f}.`)) ?? field;
  // Only the file can hold a value above a leaf (`auth: <text>`) or an unknown key.
  const source = sources.get(leaf) ?? fileSource;
  const value = getPath(raw, leaf);
  // A value above a secret field (`auth: <token>`) may be the secret itself.
  const secret = [...SECRET_FIELDS].some(
    (s) => s === leaf || s.startsWith(`${leaf}.`) || leaf.startsWith(`${s}.`),
  );
  const shown = secret || value === undefined ? '' : ` = ${JSON.stringify(value)}`;
  const from = source ? ` (from ${source}${shown})` : shown ? ` (${shown.slice(3)})` : '';
  if (issue.code === 'unrecognized_keys') {
    const known = keysAt(issue.path);
    const unknown = issue.keys.map((k) => {
      const near = nearest(k, known);
      return near ? `${k} (did you mean ${near}?)` : k;
    });
    return `${field || '(top level)'}: unknown setting(s) ${unknown.join(', ')}${source ? ` in ${source}` : ''}`;
  }
  return `${field || '(top level)'}${from}: ${issue.message}`;
}

/** The schema of the value at `path` (`['sandbox', 'maxMemory']`, `['auth', 'tokens', 0]`). */
export function schemaAt(path: readonly PropertyKey[]): z.ZodType | undefined {
  let schema: z.ZodType | undefined = ConfigSchema;
  for (const key of path) schema = schema && childOf(schema, key);
  return schema;
}

/** The keys the schema accepts in the object at `path`. */
function keysAt(path: readonly PropertyKey[]): string[] {
  const schema = schemaAt(path);
  const inner = schema && objectOf(schema);
  return inner ? Object.keys(inner.shape) : [];
}

/** The metadata of a schema or of any schema it wraps (default, optional, pipe). */
export function metaOf(schema: z.ZodType): Record<string, unknown> | undefined {
  let s: z.ZodType | undefined = schema;
  for (let hops = 0; s && hops < 8; hops++) {
    const meta = s.meta();
    if (meta) return meta;
    const def = s._zod.def as { innerType?: z.ZodType; in?: z.ZodType };
    s = def.innerType ?? def.in;
  }
  return undefined;
}

function objectOf(schema: z.ZodType): z.ZodObject | undefined {
  let s: z.ZodType | undefined = schema;
  while (s && !(s instanceof z.ZodObject)) {
    const def = s._zod.def as { innerType?: z.ZodType; out?: z.ZodType; schema?: z.ZodType };
    s = def.innerType ?? def.out ?? def.schema;
  }
  return s;
}

function childOf(schema: z.ZodType, key: PropertyKey): z.ZodType | undefined {
  let s: z.ZodType | undefined = schema;
  for (let hops = 0; s && hops < 8; hops++) {
    if (s instanceof z.ZodObject && typeof key === 'string')
      return (s.shape as Record<string, z.ZodType>)[key];
    if (s instanceof z.ZodArray && typeof key === 'number') return s.element as z.ZodType;
    const def = s._zod.def as { innerType?: z.ZodType; out?: z.ZodType; schema?: z.ZodType };
    s = def.innerType ?? def.out ?? def.schema;
  }
  return undefined;
}

/** The known key closest to a misspelt one, when it is close enough to be what was meant. */
export function nearest(key: string, known: readonly string[]): string | undefined {
  let best: { key: string; distance: number } | undefined;
  for (const k of known) {
    const d = distance(key.toLowerCase(), k.toLowerCase());
    if (!best || d < best.distance) best = { key: k, distance: d };
  }
  return best && best.distance <= Math.max(2, Math.floor(best.key.length / 3)) ? best.key : undefined;
}

function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new AppError('CONFIG_INVALID', `cannot read config file ${path}: ${(e as Error).message}`, {
      hint: 'check the path given to --config or SANDPIT_CONFIG',
    });
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (e) {
    // The parser's first line has the position; the lines after it quote the file, which may hold a token.
    const where = (e as Error).message.split('\n')[0];
    throw new AppError('CONFIG_INVALID', `config file ${path} is not valid YAML or JSON: ${where}`);
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new AppError(
      'CONFIG_INVALID',
      `config file ${path} must hold a mapping (server:, auth:, sandbox:, …)`,
    );
  }
  return parsed as Record<string, unknown>;
}

function getPath(obj: Record<string, unknown>, field: string): unknown {
  let cur: unknown = obj;
  for (const key of field.split('.')) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

function deletePath(obj: Record<string, unknown>, field: string): void {
  const keys = field.split('.');
  const parent = getPath(obj, keys.slice(0, -1).join('.'));
  if (typeof parent === 'object' && parent !== null)
    delete (parent as Record<string, unknown>)[keys[keys.length - 1]!];
}

function setPath(obj: Record<string, unknown>, field: string, value: unknown): void {
  const keys = field.split('.');
  let cur = obj;
  for (const key of keys.slice(0, -1)) {
    const next = cur[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) cur[key] = {};
    cur = cur[key] as Record<string, unknown>;
  }
  cur[keys[keys.length - 1]!] = value;
}

/** Settings that are accepted but do less than their name suggests; logged at start-up. */
export function configWarnings(config: Config): string[] {
  const warnings: string[] = [];
  if (!config.sandbox.disableNetwork && config.sandbox.egress.allow.length === 0) {
    warnings.push(
      'DISABLE_NETWORK=false (sandbox.disableNetwork: false) but sandbox.egress.allow is empty: an egress ' +
        'allowlist can name no destination, so every sandbox still runs with no network',
    );
  }
  return warnings;
}

/** How egress stands, for the start-up log: off, or the ceiling an allowlist may use. */
export function egressSummary(config: Config): string {
  const { disableNetwork, egress } = config.sandbox;
  if (disableNetwork)
    return 'Egress is off: DISABLE_NETWORK is true (sandbox.disableNetwork), every sandbox has no network';
  return (
    `Egress by allowlist: DISABLE_NETWORK is false, so a run or session that asks for network {egress: allowlist} ` +
    `gets the destinations it names within ${egress.allow.length} ceiling entries (sandbox.egress.allow); ` +
    'one that names no network still has none'
  );
}
