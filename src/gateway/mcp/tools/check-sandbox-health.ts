/**
 * check_sandbox_health(): the seed servers' health tool. The seed's result shape was not available
 * to us; this snake_case shape is our design (docs/mcp.md).
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import * as z from 'zod';
import type { ToolDeps } from '../context.js';
import { instrument } from '../instrument.js';
import { toolResult } from '../results.js';
import { NoInput } from '../schemas.js';

export const SeedHealthOutput = z.object({
  status: z.enum(['healthy', 'unhealthy']).describe('healthy when sandboxes can start'),
  healthy: z.boolean().describe('Same as status == healthy'),
  engine_available: z.boolean().describe('True when the container engine answered'),
  backend: z.string().describe('docker or kubernetes'),
  message: z.string().describe('What is wrong and how to fix it, or what is up'),
  missing_images: z.array(z.string()).describe('Sandbox images that still need building'),
  active_runs: z.number().int().describe('Runs executing now'),
  queued_runs: z.number().int().describe('Runs waiting for a slot'),
});

export function registerCheckSandboxHealth(server: McpServer, deps: ToolDeps): void {
  server.registerTool(
    'check_sandbox_health',
    {
      title: 'Check sandbox health',
      description:
        'Reports whether code can run (engine and images), with the fix when it cannot. Compatible with the seed servers.',
      inputSchema: NoInput,
      outputSchema: SeedHealthOutput,
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    instrument('check_sandbox_health', deps, async () => {
      const h = await deps.service.health();
      const result: z.infer<typeof SeedHealthOutput> = {
        status: h.ok ? 'healthy' : 'unhealthy',
        healthy: h.ok,
        engine_available: h.ok || h.images !== undefined,
        backend: h.backend,
        message: h.detail,
        missing_images: h.images?.missing ?? [],
        active_runs: h.running,
        queued_runs: h.queued,
      };
      return toolResult(SeedHealthOutput, result, `${result.status}: ${result.message}`);
    }),
  );
}
