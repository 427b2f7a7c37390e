/** cancel_run: stops a live run and removes its sandbox; the record stays readable with phase Cancelled. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type * as z from 'zod';
import { principalOf, type ToolDeps } from '../context.js';
import { instrument } from '../instrument.js';
import { renderRun } from '../render.js';
import { toolResult } from '../results.js';
import { RunIdInput, RunResultOutput } from '../schemas.js';

export function registerCancelRun(server: McpServer, deps: ToolDeps): void {
  server.registerTool(
    'cancel_run',
    {
      title: 'Cancel a run',
      description:
        'Cancels a running run, waits until its sandbox is removed and returns its final state (phase Cancelled). ' +
        'A run that already ended is returned unchanged.',
      inputSchema: RunIdInput,
      outputSchema: RunResultOutput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    instrument('cancel_run', deps, async ({ runId }: z.infer<typeof RunIdInput>, extra) => {
      const result = await deps.service.runs.cancel(runId, principalOf(extra, deps));
      return toolResult(RunResultOutput, result, renderRun(result));
    }),
  );
}
