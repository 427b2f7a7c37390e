/**
 * The tool catalog: every tool as data (name, schemas, annotations, handler), and the tools/list
 * answer built from it once per policy rather than per request. The JSON schemas are drawn from the
 * zod schemas with an explicit draft-07 `$schema`, and without the bounds zod adds to every integer
 * (±2^53-1), which function-calling back ends that take an OpenAPI subset refuse.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { type CallToolRequest, ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import type { Policy } from '../../policy/policy.js';
import type { ToolDeps } from './context.js';
import type { PrincipalTaskStore } from './tasks.js';
import { toolCallHandler } from './tool-call.js';
import type { ToolSpec } from './tool-spec.js';
import { buildToolSchemas, type ToolSchemas } from './schemas.js';
import { buildSessionSchemas, type SessionSchemas } from './session-schemas.js';

export const JSON_SCHEMA_DIALECT = 'http://json-schema.org/draft-07/schema#';

export interface CatalogOptions {
  /** Offer the seed servers' execute_python_code and check_sandbox_health (default true). */
  seedTools?: boolean;
}

export interface ToolCatalog {
  specs: readonly ToolSpec[];
  /** The tools/list answer, built once. */
  list: readonly Tool[];
}

const BOUNDLESS = Number.MAX_SAFE_INTEGER;

/** A zod object as a tool's JSON schema (draft-07, `$schema` explicit, no type arrays or safe-integer bounds). */
export function toToolJsonSchema(schema: z.ZodObject, io: 'input' | 'output'): Tool['inputSchema'] {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { target: 'draft-7', io, reused: 'inline' });
  const body = portable(json) as Record<string, unknown>;
  return { $schema: JSON_SCHEMA_DIALECT, ...body } as unknown as Tool['inputSchema'];
}

/**
 * What zod emits, in the forms every consumer takes: `type: ["integer", "null"]` (a nullable) as
 * anyOf, and no ±(2^53-1) bounds, which zod puts on every integer and which mean no bound.
 */
function portable(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(portable);
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if ((key === 'minimum' || key === 'maximum') && Math.abs(value as number) === BOUNDLESS) continue;
    if (key === 'type' && Array.isArray(value)) out.anyOf = value.map((type: unknown) => ({ type }));
    else out[key] = portable(value);
  }
  return out;
}

export function buildCatalog(
  policy: Policy,
  specsFor: (schemas: ToolSchemas, sessions: SessionSchemas) => readonly ToolSpec[],
  options: CatalogOptions = {},
): ToolCatalog {
  const specs = specsFor(buildToolSchemas(policy), buildSessionSchemas(policy)).filter(
    (s) => options.seedTools !== false || !s.seed,
  );
  const list = specs.map((s): Tool => ({
    name: s.name,
    title: s.title,
    description: s.description,
    inputSchema: toToolJsonSchema(s.input.listed, 'input'),
    outputSchema: toToolJsonSchema(s.output, 'output'),
    annotations: s.annotations,
    ...(s.task ? { execution: { taskSupport: 'optional' as const } } : {}),
  }));
  return { specs, list };
}

/** Makes one server answer tools/list from the catalog, and tools/call with its tools (tool-call.ts). */
export function registerCatalog(
  server: McpServer,
  catalog: ToolCatalog,
  deps: ToolDeps,
  tasks: PrincipalTaskStore,
): void {
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...catalog.list] }));
  // The SDK's Server checks params against CallToolRequestSchema itself, answering -32602 naming the
  // field; registered with the strict schema, the Protocol's own parse came first and a bad params
  // was -32603, an internal error. The handler still only sees requests that passed the check.
  const call = toolCallHandler(catalog.specs, deps, tasks);
  server.server.setRequestHandler(ANY_TOOLS_CALL, (request, extra) =>
    call(request as CallToolRequest, extra),
  );
}

/** tools/call with any params: the Server validates them (see registerCatalog). */
const ANY_TOOLS_CALL = z.object({ method: z.literal('tools/call'), params: z.unknown() });
