/**
 * What models see in tools/list: its size within budget, every schema valid draft-07 JSON Schema
 * (checked with ajv) with its `$schema` explicit, none of the constructs that OpenAPI-subset
 * function-calling back ends refuse, the language as an enum of the server's templates, and the
 * names a call may use that the schema does not list (`template`, aliases, numbers for quantities).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Ajv } from 'ajv';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult, ListToolsResult } from '@modelcontextprotocol/sdk/types.js';
import { toEntry } from '../../../src/api/egress.js';
import type { SandboxBackend } from '../../../src/backends/types.js';
import { JSON_SCHEMA_DIALECT } from '../../../src/gateway/mcp/catalog.js';
import { buildToolCatalog, createMcpServer } from '../../../src/gateway/mcp/server.js';
import { RUN_TOOL_NAMES, SEED_TOOL_NAMES, TOOL_NAMES } from '../../../src/gateway/mcp/tools/index.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy, type PolicyOptions } from '../../../src/policy/policy.js';
import { BUILTIN_TEMPLATES } from '../../../src/policy/templates.js';

/** tools/list of these 8 tools on main before issue 10, measured the same way (bytes of the JSON). */
const BEFORE_BYTES = 28_827;
const BUDGET_BYTES = Math.floor(BEFORE_BYTES / 2);
/** Every tool, the session tools included, must keep to the average the budget allows those 8. */
const PER_TOOL_BYTES = Math.floor(BUDGET_BYTES / RUN_TOOL_NAMES.length);

const backend: SandboxBackend = {
  name: 'docker',
  start: () => assert.fail('no run should reach the backend in these tests'),
  health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'up' }),
  close: () => Promise.resolve(),
};

async function connect(policy: PolicyOptions = {}, seedTools?: boolean) {
  const metrics = createMetrics();
  const service = new SandpitService({
    backend,
    policy: createPolicy(policy),
    logger: silentLogger(),
    metrics,
    slots: { maxConcurrent: 1, maxQueued: 0 },
  });
  const deps = { service, logger: silentLogger(), metrics, defaultPrincipal: LOCAL_PRINCIPAL, version: '0' };
  const server = createMcpServer(deps, buildToolCatalog(deps, seedTools === undefined ? {} : { seedTools }));
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'unit', version: '1' });
  await Promise.all([server.connect(b), client.connect(a)]);
  const listed: ListToolsResult = await client.listTools();
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  return { client, listed, call };
}

type Json = { [key: string]: Json } | Json[] | string | number | boolean | null;

/** Every sub-schema, with its JSON pointer. */
function* walk(node: Json, at = ''): Generator<[string, Record<string, Json>]> {
  if (Array.isArray(node)) {
    for (const [i, n] of node.entries()) yield* walk(n, `${at}/${i}`);
  } else if (node !== null && typeof node === 'object') {
    yield [at, node];
    for (const [k, v] of Object.entries(node)) yield* walk(v, `${at}/${k}`);
  }
}

const text = (r: CallToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('tools/list', () => {
  test(`fits its budget: the run tools at most ${BUDGET_BYTES} bytes (half of ${BEFORE_BYTES}), every tool at most ${PER_TOOL_BYTES} on average`, async () => {
    const { listed, client } = await connect();
    const size = (t: object) => Buffer.byteLength(JSON.stringify(t));
    const sizes = listed.tools.map((t) => `${t.name} ${size(t)}`).join(', ');
    assert.equal(listed.tools.length, TOOL_NAMES.length);
    const runTools = listed.tools.filter((t) => (RUN_TOOL_NAMES as readonly string[]).includes(t.name));
    assert.equal(runTools.length, 8);
    const runBytes = runTools.reduce((n, t) => n + size(t), 0);
    assert.ok(runBytes <= BUDGET_BYTES, `the run tools take ${runBytes} bytes (${sizes})`);
    const bytes = Buffer.byteLength(JSON.stringify(listed));
    assert.ok(
      bytes / listed.tools.length <= PER_TOOL_BYTES,
      `${bytes / listed.tools.length} bytes per tool (${sizes})`,
    );
    await client.close();
  });

  test('server.seedTools: false hides the seed servers’ two tools; the rest stay', async () => {
    const { listed, client, call } = await connect({}, false);
    assert.deepEqual(
      listed.tools.map((t) => t.name).sort(),
      TOOL_NAMES.filter((n) => !(SEED_TOOL_NAMES as readonly string[]).includes(n)).sort(),
    );
    assert.match(text(await call('execute_python_code', { code_string: 'print(1)' })), /not found/);
    await client.close();
  });
});

describe('every tool schema', () => {
  test('is valid draft-07 JSON Schema (ajv compiles it) and says so in $schema', async () => {
    const { listed, client } = await connect();
    const ajv = new Ajv({ strict: true, strictRequired: false, allErrors: true });
    for (const tool of listed.tools) {
      for (const [kind, schema] of [
        ['input', tool.inputSchema],
        ['output', tool.outputSchema],
      ] as const) {
        assert.ok(schema, `${tool.name} has an ${kind} schema`);
        assert.equal(schema.$schema, JSON_SCHEMA_DIALECT, `${tool.name} ${kind}: explicit draft-07 $schema`);
        assert.doesNotThrow(() => ajv.compile(schema), `${tool.name} ${kind} compiles`);
      }
    }
    await client.close();
  });

  test('has no type unions, no ±2^53-1 bounds, and inputs no anyOf/oneOf', async () => {
    const { listed, client } = await connect();
    const bad: string[] = [];
    for (const tool of listed.tools) {
      for (const [kind, schema] of [
        ['input', tool.inputSchema],
        ['output', tool.outputSchema],
      ] as const) {
        for (const [at, node] of walk(schema as Json)) {
          const where = `${tool.name} ${kind}${at}`;
          if (Array.isArray(node.type)) bad.push(`${where}: type ${JSON.stringify(node.type)}`);
          for (const bound of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'])
            if (typeof node[bound] === 'number' && Math.abs(node[bound]) >= Number.MAX_SAFE_INTEGER)
              bad.push(`${where}: ${bound} ${String(node[bound])}`);
          if (kind === 'input' && (node.anyOf || node.oneOf)) bad.push(`${where}: anyOf/oneOf`);
        }
      }
    }
    assert.deepEqual(bad, []);
    await client.close();
  });

  test('structured results validate against the output schemas (ajv, as clients check them)', async () => {
    const { listed, client, call } = await connect();
    const ajv = new Ajv({ strict: false });
    for (const name of ['list_templates', 'sandbox_health', 'check_sandbox_health']) {
      const tool = listed.tools.find((t) => t.name === name)!;
      const r = await call(name, {});
      const validate = ajv.compile(tool.outputSchema!);
      assert.ok(validate(r.structuredContent), `${name}: ${ajv.errorsText(validate.errors)}`);
    }
    await client.close();
  });
});

describe('run_code and run_command inputs', () => {
  test('`language` is the one name, an enum of the server’s templates; `template` is not listed', async () => {
    const { listed, client } = await connect();
    for (const name of ['run_code', 'run_command']) {
      const props = listed.tools.find((t) => t.name === name)!.inputSchema.properties as Record<
        string,
        { enum?: string[]; type?: string }
      >;
      assert.deepEqual(
        props.language?.enum,
        BUILTIN_TEMPLATES.map((t) => t.name),
      );
      assert.equal(props.template, undefined, `${name} lists only language`);
      assert.equal(
        (props.resources as { properties: Record<string, { type: string }> }).properties.cpu!.type,
        'string',
      );
    }
    await client.close();
  });

  test('the enum follows the policy: a server with two templates lists two', async () => {
    const { listed, client } = await connect({ templates: BUILTIN_TEMPLATES.slice(0, 2) });
    const props = listed.tools.find((t) => t.name === 'run_code')!.inputSchema.properties as Record<
      string,
      { enum?: string[] }
    >;
    assert.deepEqual(props.language?.enum, ['python', 'python-data']);
    await client.close();
  });

  test('the deadline shows the ceiling as its maximum', async () => {
    const { listed, client } = await connect({ ceilings: { timeoutSeconds: 45 } });
    const props = listed.tools.find((t) => t.name === 'run_code')!.inputSchema.properties as Record<
      string,
      { maximum?: number }
    >;
    assert.equal(props.timeoutSeconds?.maximum, 45);
    await client.close();
  });

  // A deadline over the ceiling: the policy refuses it, so a POLICY_DENIED proves the input passed.
  const overCeiling = { timeoutSeconds: 999 };
  const quietly: [string, string, Record<string, unknown>][] = [
    ['template instead of language', 'run_code', { code: 'x', template: 'python' }],
    ['an alias', 'run_code', { code: 'x', language: 'py' }],
    ['template on run_command', 'run_command', { command: ['true'], template: 'bash' }],
    ['a number for a quantity', 'run_code', { code: 'x', resources: { cpu: 0.5 } }],
    ['the same value in both', 'run_code', { code: 'x', language: 'python', template: 'python' }],
  ];
  for (const [what, tool, args] of quietly) {
    test(`accepted quietly: ${what}`, async () => {
      const { client, call } = await connect();
      const r = await call(tool, { ...args, ...overCeiling });
      assert.match(text(r), /^POLICY_DENIED: .*timeoutSeconds/, text(r));
      await client.close();
    });
  }

  test('language and template that disagree: INVALID_REQUEST naming both', async () => {
    const { client, call } = await connect();
    assert.match(
      text(await call('run_code', { code: 'x', language: 'python', template: 'bash' })),
      /^INVALID_REQUEST: language "python" and template "bash" disagree/,
    );
    await client.close();
  });
});

describe('network in the tools', () => {
  const egress = { egress: { disabled: false, ceiling: ['pypi.org', '10.0.0.0/24:5432'].map(toEntry) } };
  const props = (listed: ListToolsResult, name: string) =>
    listed.tools.find((t) => t.name === name)!.inputSchema.properties as Record<string, Json>;

  test('egress off (the default): not listed; a call that sends one is refused, naming DISABLE_NETWORK', async () => {
    const { listed, client, call } = await connect();
    for (const name of ['run_code', 'run_command', 'sandbox_create'])
      assert.equal(props(listed, name).network, undefined);
    const r = await call('run_code', { code: 'x', network: { egress: 'allowlist', allow: ['pypi.org'] } });
    assert.match(text(r), /^POLICY_DENIED: .*DISABLE_NETWORK/);
    await client.close();
  });

  test('egress on: run_code, run_command and sandbox_create list it, naming the ceiling', async () => {
    const { listed, client } = await connect(egress);
    for (const name of ['run_code', 'run_command', 'sandbox_create']) {
      assert.match(
        JSON.stringify(props(listed, name).network),
        /within: pypi\.org:80,443, 10\.0\.0\.0\/24:5432/,
      );
    }
    assert.match(
      listed.tools.find((t) => t.name === 'run_code')!.description!,
      /no network unless network names an allowlist/,
    );
    await client.close();
  });

  test('egress on: an entry beyond the ceiling is refused with its rule', async () => {
    const { client, call } = await connect({ ...egress });
    const r = await call('run_code', {
      code: 'x',
      network: { egress: 'allowlist', allow: ['evil.com', 'pypi.org:22'] },
    });
    assert.match(
      text(r),
      /^POLICY_DENIED: .*network\.allow\.0: evil\.com:80,443 is not within the egress ceiling/,
    );
    assert.match(text(r), /network\.allow\.1: pypi\.org:22 is not within the egress ceiling/);
    await client.close();
  });
});
