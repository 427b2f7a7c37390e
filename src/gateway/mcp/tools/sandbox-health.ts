/** sandbox_health: whether runs can start, and what to fix when they cannot. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ToolDeps } from '../context.js';
import { instrument } from '../instrument.js';
import { toolResult } from '../results.js';
import { HealthOutput, NoInput } from '../schemas.js';

export function registerSandboxHealth(server: McpServer, deps: ToolDeps): void {
  server.registerTool(
    'sandbox_health',
    {
      title: 'Sandbox health',
      description:
        'Reports whether sandboxes can start (engine, images, runtimes) and how many runs are active or queued.',
      inputSchema: NoInput,
      outputSchema: HealthOutput,
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    instrument('sandbox_health', deps, async () => {
      const health = await deps.service.health();
      const text = `${health.ok ? 'healthy' : 'unhealthy'}: ${health.detail}; ${health.running} running, ${health.queued} queued`;
      return toolResult(HealthOutput, health, text);
    }),
  );
}
