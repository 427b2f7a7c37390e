/** sandbox_health: whether runs can start, and what to fix when they cannot. */
import type { ToolSpec } from '../tool-spec.js';
import { toolResult } from '../results.js';
import { HealthOutput, type ToolSchemas } from '../schemas.js';
import { READ_ANNOTATIONS } from './get-run.js';

export function sandboxHealthTool(schemas: ToolSchemas): ToolSpec {
  return {
    name: 'sandbox_health',
    title: 'Sandbox health',
    description: 'Whether sandboxes can start (engine, images), with the fix if not; runs active and queued.',
    input: schemas.none,
    output: HealthOutput,
    annotations: READ_ANNOTATIONS,
    handler: (deps) => async () => {
      const health = await deps.service.health();
      const text = `${health.ok ? 'healthy' : 'unhealthy'}: ${health.detail}; ${health.running} running, ${health.queued} queued`;
      return toolResult(HealthOutput, health, text);
    },
  };
}
