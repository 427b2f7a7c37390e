/**
 * The layer rules of eslint.layers.js, checked on fixtures: every upward or sideways import that
 * DESIGN.md §9 forbids fails lint, and the allowed ones pass. The real tree passing lint (npm run
 * lint) is the other half.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { LAYERS, layerConfigs } from '../../../eslint.layers.js';

const eslint = new ESLint({
  cwd: process.cwd(),
  overrideConfigFile: true,
  overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser } }, ...layerConfigs()],
});

/** The restricted-import messages a file at `path` importing `specifier` gets. */
async function refusals(path: string, specifier: string): Promise<string[]> {
  const [result] = await eslint.lintText(`import { x } from '${specifier}';\nexport const y = x;\n`, {
    filePath: path,
  });
  return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

const forbidden: [string, string, RegExp][] = [
  ['src/controller/sandboxrun/reconcile.ts', '../../backends/types.js', /src\/controller may import only/],
  [
    'src/controller/reconcile.ts',
    '../gateway/service.js',
    /src\/backends is not below it|src\/gateway is not below it/,
  ],
  ['src/controller/reconcile.ts', '../config/schema.js', /src\/config is not below it/],
  ['src/gateway/runs.ts', '../controller/reconcile.js', /src\/controller is not below it/],
  ['src/gateway/mcp/tools/run-code.ts', '../../../kube/client.js', /src\/kube is not below it/],
  ['src/gateway/auth.ts', '../config/schema.js', /src\/config is not below it/],
  ['src/backends/docker/docker-backend.ts', '../../gateway/service.js', /src\/gateway is not below it/],
  ['src/backends/kubernetes/run-api.ts', '../../controller/children.js', /src\/controller is not below it/],
  ['src/api/run.ts', '../policy/policy.js', /src\/policy is not below it/],
  ['src/shared/errors.ts', '../api/run.js', /src\/shared may import only nothing else/],
  ['src/policy/evaluate.ts', '../runner/protocol.js', /src\/runner is not below it/],
  ['src/runner/protocol.ts', '../backends/types.js', /src\/backends is not below it/],
  ['src/kube/client.ts', '../policy/policy.js', /src\/policy is not below it/],
  [
    'src/backends/kubernetes/run-api.ts',
    '@kubernetes/client-node',
    /only src\/kube imports @kubernetes\/client-node/,
  ],
  [
    'src/gateway/runs.ts',
    '@modelcontextprotocol/sdk/server/mcp.js',
    /only src\/gateway\/mcp imports the MCP SDK/,
  ],
  [
    'src/cmd/serve.ts',
    '@modelcontextprotocol/sdk/server/mcp.js',
    /only src\/gateway\/mcp imports the MCP SDK/,
  ],
];

const allowed: [string, string][] = [
  ['src/controller/sandboxrun/reconcile.ts', '../../kube/client.js'],
  ['src/controller/reconcile.ts', '../runner/protocol.js'],
  ['src/gateway/runs.ts', '../backends/types.js'],
  ['src/gateway/mcp/server.ts', '@modelcontextprotocol/sdk/server/mcp.js'],
  ['src/backends/kubernetes/run-api.ts', '../../kube/client.js'],
  ['src/kube/client.ts', '@kubernetes/client-node'],
  ['src/cmd/operator.ts', '../controller/operator.js'],
  ['src/api/result.ts', '../shared/quantity.js'],
  ['src/gateway/runs.ts', './deps.js'],
];

describe('eslint.layers.js', () => {
  for (const [path, specifier, why] of forbidden) {
    test(`${path} may not import ${specifier}`, async () => {
      const messages = await refusals(path, specifier);
      assert.ok(messages.length > 0, 'lint let it through');
      assert.ok(
        messages.some((m) => why.test(m)),
        messages.join('\n'),
      );
    });
  }
  for (const [path, specifier] of allowed) {
    test(`${path} may import ${specifier}`, async () => {
      assert.deepEqual(await refusals(path, specifier), []);
    });
  }

  test('every top-level folder of src/ has a layer, and every layer names only known folders', async () => {
    const { readdirSync } = await import('node:fs');
    const folders = readdirSync('src', { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
    const layers = LAYERS;
    for (const f of folders) assert.ok(f in layers, `src/${f} has no layer in eslint.layers.js`);
    for (const deps of Object.values(layers)) for (const d of deps ?? []) assert.ok(d in layers, d);
  });
});
