/** cancel_run: stops a live run and removes its sandbox; the record stays readable with phase Cancelled. */
import type { ToolSpec } from '../tool-spec.js';
import { principalOf } from '../context.js';
import { runToolResult } from '../run.js';
import { RunResultOutput, type ToolSchemas } from '../schemas.js';
import { END_ANNOTATIONS } from './run-code.js';

export function cancelRunTool(schemas: ToolSchemas): ToolSpec {
  return {
    name: 'cancel_run',
    title: 'Cancel a run',
    description: 'Stops a run, waits until its sandbox is gone, and returns it (phase Cancelled).',
    input: schemas.runId,
    output: RunResultOutput,
    annotations: END_ANNOTATIONS,
    handler: (deps) => async (args: { runId: string }, extra) => {
      const principal = principalOf(extra, deps);
      const result = await deps.service.runs.cancel(args.runId, principal);
      return runToolResult(deps, result, principal);
    },
  };
}
