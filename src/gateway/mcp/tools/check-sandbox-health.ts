/**
 * check_sandbox_health(): the seed servers' health tool. The seed's result shape was not available
 * to us; this snake_case shape is our design (docs/mcp.md).
 */
import * as z from 'zod';
import type { ToolSpec } from '../tool-spec.js';
import { toolResult } from '../results.js';
import type { ToolSchemas } from '../schemas.js';
import { READ_ANNOTATIONS } from './get-run.js';

export const SeedHealthOutput = z.object({
  status: z.enum(['healthy', 'unhealthy']).describe('healthy: sandboxes can start'),
  healthy: z.boolean().describe('status == healthy'),
  engine_available: z.boolean().describe('The engine answered'),
  backend: z.string().describe('docker, oci, kubernetes'),
  message: z.string().describe('What is wrong and the fix, or what is up'),
  missing_images: z.array(z.string()).describe('Images to build'),
  active_runs: z.number().int().describe('Runs executing'),
  queued_runs: z.number().int().describe('Runs waiting'),
});

export function checkSandboxHealthTool(schemas: ToolSchemas): ToolSpec {
  return {
    name: 'check_sandbox_health',
    title: 'Check sandbox health',
    description: 'Seed-compatible: whether code can run (engine and images), with the fix when it cannot.',
    input: schemas.none,
    output: SeedHealthOutput,
    annotations: READ_ANNOTATIONS,
    seed: true,
    handler: (deps) => async () => {
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
    },
  };
}
