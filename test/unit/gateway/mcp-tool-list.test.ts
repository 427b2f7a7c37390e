/**
 * tools/list is built once: every server made with toolList()'s answer returns that list instead
 * of rendering its tools' schemas again on each call.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { SandboxBackend } from '../../../src/backends/types.js';
import type { ToolDeps } from '../../../src/gateway/mcp/context.js';
import { createMcpServer, toolList } from '../../../src/gateway/mcp/server.js';
import { LOCAL_PRINCIPAL } from '../../../src/gateway/principal.js';
import { SandpitService } from '../../../src/gateway/service.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { createPolicy } from '../../../src/policy/policy.js';

const backend: SandboxBackend = {
  name: 'docker',
  start: () => assert.fail('nothing runs here'),
  health: () => Promise.resolve({ ok: true, backend: 'docker', detail: 'test' }),
  close: () => Promise.resolve(),
};
const metrics = createMetrics();
const deps: ToolDeps = {
  service: new SandpitService({
    backend,
    policy: createPolicy(),
    logger: silentLogger(),
    metrics,
    slots: { maxConcurrent: 1, maxQueued: 0 },
  }),
  logger: silentLogger(),
  metrics,
  defaultPrincipal: LOCAL_PRINCIPAL,
  version: '0.0.0-test',
};

async function listed(tools?: readonly Tool[]): Promise<Tool[]> {
  const server = createMcpServer(deps, tools);
  const [a, b] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'unit', version: '1' });
  await Promise.all([server.connect(b), client.connect(a)]);
  const result = (await client.listTools()).tools;
  await client.close();
  return result;
}

test('toolList() is what the SDK renders for every tool', async () => {
  assert.deepEqual(await toolList(deps), await listed());
});

test('a server given the list answers tools/list from it, not from its own tools', async () => {
  const marker: Tool = { name: 'from_the_list', inputSchema: { type: 'object' } };
  assert.deepEqual(
    (await listed([marker])).map((t) => t.name),
    ['from_the_list'],
  );
});
