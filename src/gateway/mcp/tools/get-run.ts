/** get_run: a run's state; live output while it runs, the final result after (also after a cancel). */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type * as z from 'zod';
import { principalOf, type ToolDeps } from '../context.js';
import { instrument } from '../instrument.js';
import { renderRun } from '../render.js';
import { toolResult } from '../results.js';
import { RunIdInput, RunResultOutput } from '../schemas.js';

export function registerGetRun(server: McpServer, deps: ToolDeps): void {
  server.registerTool(
    'get_run',
    {
      title: 'Get a run',
      description:
        "Returns a run's phase and output: live output while it runs, the final result once it has ended.",
      inputSchema: RunIdInput,
      outputSchema: RunResultOutput,
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    instrument('get_run', deps, async ({ runId }: z.infer<typeof RunIdInput>, extra) => {
      const result = deps.service.runs.get(runId, principalOf(extra, deps));
      return Promise.resolve(toolResult(RunResultOutput, result, renderRun(result)));
    }),
  );
}
