/** get_run: a run's state; live output while it runs, the final result after (also after a cancel). */
import type { ToolSpec } from '../tool-spec.js';
import { principalOf } from '../context.js';
import { runToolResult } from '../run.js';
import { RunResultOutput, type ToolSchemas } from '../schemas.js';

export const READ_ANNOTATIONS = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
} as const;

export function getRunTool(schemas: ToolSchemas): ToolSpec {
  return {
    name: 'get_run',
    title: 'Get a run',
    description: "A run's phase and output: live while it runs, the final result once it has ended.",
    input: schemas.runId,
    output: RunResultOutput,
    annotations: READ_ANNOTATIONS,
    handler: (deps) => async (args: { runId: string }, extra) => {
      const principal = principalOf(extra, deps);
      const result = await deps.service.runs.get(args.runId, principal);
      return runToolResult(deps, result, principal);
    },
  };
}
