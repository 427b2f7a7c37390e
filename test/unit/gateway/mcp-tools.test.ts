/**
 * The tool surface over a real MCP Client and server linked in memory: names, descriptions on every
 * field, annotations, output schemas, and the AppError → isError mapping for requests refused
 * before any sandbox exists (so the backend here is never asked to run anything).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { CallToolResultSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { createMcpServer } from '../../../src/gateway/mcp/server.js';
import { TOOL_NAMES } from '../../../src/gateway/mcp/tools/index.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';

const backend: SandboxBackend = {
  name: 'docker',
  start: () => assert.fail('no run should reach the backend in these tests'),
  health: () => Promise.resolve({ ok: false, backend: 'docker', detail: 'engine down; start it with X' }),
  close: () => Promise.resolve(),
};

let client: Client;
let tools: Tool[];
const metrics = createMetrics();

before(async () => {
  const service = new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics,
    slots: { maxConcurrent: 1, maxQueued: 0 },
  });
  const server = createMcpServer({
    service,
    logger: silentLogger(),
    metrics,
    defaultPrincipal: LOCAL_PRINCIPAL,
    version: '0.0.0-test',
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  client = new Client({ name: 'unit', version: '1' });
  await Promise.all([server.connect(b), client.connect(a)]);
  tools = (await client.listTools()).tools;
});
after(() => client.close());

type JsonSchema = {
  type?: string;
  description?: string;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
};

/** Dotted paths of properties without a description, at any depth. */
function undescribed(schema: JsonSchema, path = ''): string[] {
  const out: string[] = [];
  for (const [key, prop] of Object.entries(schema.properties ?? {})) {
    const here = path ? `${path}.${key}` : key;
    if (!prop.description) out.push(here);
    out.push(...undescribed(prop, here));
    if (prop.items) out.push(...undescribed(prop.items, `${here}[]`));
    for (const alt of prop.anyOf ?? []) out.push(...undescribed(alt, here));
  }
  return out;
}

const call = async (name: string, args: Record<string, unknown> = {}) =>
  (await client.callTool({ name, arguments: args })) as CallToolResult;
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

test('the tool set', () => {
  assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
});

test('every tool has a title, a description, all four annotations and an output schema', () => {
  for (const t of tools) {
    assert.ok(t.title && t.description && t.description.length > 30, t.name);
    const a = t.annotations ?? {};
    for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const) {
      assert.equal(typeof a[hint], 'boolean', `${t.name}.${hint}`);
    }
    assert.equal(a.openWorldHint, false, `${t.name}: sandboxes have no network`);
    assert.equal(t.outputSchema?.type, 'object', t.name);
  }
});

test('every input and output field is described, at every depth', () => {
  for (const t of tools) {
    assert.deepEqual(undescribed(t.inputSchema as JsonSchema), [], `${t.name} input`);
    assert.deepEqual(undescribed(t.outputSchema as JsonSchema), [], `${t.name} output`);
  }
});

test('inputs refuse unknown fields; run_code needs only code', () => {
  const runCode = tools.find((t) => t.name === 'run_code')!;
  assert.deepEqual(runCode.inputSchema.required, ['code']);
  assert.equal((runCode.inputSchema as { additionalProperties?: boolean }).additionalProperties, false);
  const seed = tools.find((t) => t.name === 'execute_python_code')!;
  assert.deepEqual(seed.inputSchema.required, ['code_string']);
  assert.deepEqual(Object.keys(seed.inputSchema.properties ?? {}), ['code_string']);
});

test('a policy denial is an isError result that names the field, the limit and a hint', async () => {
  const r = await call('run_code', { code: 'print(1)', timeoutSeconds: 999, resources: { memory: '8g' } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent, undefined);
  assert.match(text(r), /^POLICY_DENIED: /);
  assert.match(text(r), /\n {2}- timeoutSeconds: 999s is over the ceiling of 30s \(limit: 30s\)/);
  assert.match(text(r), /\n {2}- resources\.memory: .* \(limit: 512Mi\)/);
  assert.match(text(r), /\nhint: change the named fields/);
  assert.equal((r._meta?.['sandpit.dev/error'] as { code: string }).code, 'POLICY_DENIED');
});

test('invalid requests and unknown runs map to their codes', async () => {
  assert.match(
    text(await call('run_code', { code: 'x', language: 'python', template: 'bash' })),
    /^INVALID_REQUEST: language "python" and template "bash" disagree/,
  );
  assert.match(
    text(await call('run_command', { command: ['true'], files: [{ path: '../etc/x', content: '' }] })),
    /files/,
  );
  assert.match(text(await call('get_run', { runId: 'run-nope' })), /^NOT_FOUND: no run run-nope\nhint: /);
  const unknownField = await call('run_code', { code: 'x', shell: true });
  assert.equal(unknownField.isError, true);
  assert.match(text(unknownField), /shell/);
});

test('the health tools report an engine that is down, with the fix', async () => {
  const h = await call('sandbox_health');
  assert.equal(h.isError, undefined);
  assert.deepEqual(h.structuredContent, {
    ok: false,
    backend: 'docker',
    detail: 'engine down; start it with X',
    running: 0,
    queued: 0,
  });
  const seed = await call('check_sandbox_health');
  assert.deepEqual(seed.structuredContent, {
    status: 'unhealthy',
    healthy: false,
    engine_available: false,
    backend: 'docker',
    message: 'engine down; start it with X',
    missing_images: [],
    active_runs: 0,
    queued_runs: 0,
  });
});

test('list_templates gives every template with its limits', async () => {
  const r = await call('list_templates');
  const templates = r.structuredContent?.templates as {
    name: string;
    libraries: string[];
    defaults: { timeoutSeconds: number; memory: string };
  }[];
  assert.deepEqual(
    templates.map((t) => t.name),
    ['python', 'python-data', 'node', 'bash', 'c', 'rust'],
  );
  assert.equal(templates[0]!.defaults.timeoutSeconds, 30);
  assert.match(text(r), /^python \(sandpit\/python:3\.11\): /);
  // Which libraries each image has: python has pip and venv, node npm (both reach an index only with egress).
  assert.ok(
    templates[0]!.libraries.some((l) => /pip and venv/.test(l)),
    'python names pip and venv',
  );
  assert.ok(
    ['numpy', 'pandas', 'matplotlib', 'scipy', 'pillow'].every((lib) =>
      templates[1]!.libraries.some((l) => l.startsWith(lib)),
    ),
    'python-data names numpy, pandas, matplotlib, scipy and pillow',
  );
  assert.ok(
    templates[2]!.libraries.some((l) => /^npm \(a registry needs an egress allowlist/.test(l)),
    'node says it has npm, and what it needs',
  );
  assert.ok(templates.every((t) => t.libraries.length > 0));
  assert.match(text(r), /^python .*with the standard library, pip and venv/);
});

test('tool calls are counted by tool and outcome', async () => {
  const before = (await metrics.registry.getSingleMetricAsString('sandpit_tool_calls_total')).match(
    /outcome="policy_denied",component="gateway"} (\d+)/,
  )?.[1];
  await call('run_code', { code: 'x', timeoutSeconds: 999 });
  const after = (await metrics.registry.getSingleMetricAsString('sandpit_tool_calls_total')).match(
    /tool="run_code",outcome="policy_denied",component="gateway"} (\d+)/,
  )?.[1];
  assert.equal(Number(after), Number(before ?? 0) + 1);
});

test('arguments nested too deep are refused as INVALID_REQUEST, and the call is still logged (no stack overflow)', async () => {
  const deep = JSON.parse(`${'['.repeat(50_000)}${']'.repeat(50_000)}`) as unknown;
  const r = await call('run_code', { code: 'print(1)', files: deep });
  assert.equal(r.isError, true);
  const error = (r._meta as { 'sandpit.dev/error': { code: string; violations: { field: string }[] } })[
    'sandpit.dev/error'
  ];
  assert.equal(error.code, 'INVALID_REQUEST');
  assert.match(error.violations[0]?.field ?? '', /^files(\.0)+$/);
});

test('tools/call whose params are not a call is -32602 Invalid params naming the field, not an internal error', async () => {
  for (const params of [{}, { name: 'run_code', arguments: [1] }, { name: 7 }]) {
    await assert.rejects(
      client.request({ method: 'tools/call', params }, CallToolResultSchema),
      (e: Error & { code?: number }) => {
        assert.equal(e.code, -32602, e.message);
        assert.match(e.message, /Invalid tools\/call request: .*(name|arguments)/s);
        return true;
      },
    );
  }
  assert.equal((await call('list_templates')).isError, undefined, 'the server answers on');
});
