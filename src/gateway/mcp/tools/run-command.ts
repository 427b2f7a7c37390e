/** run_command: an explicit argv in one fresh sandbox; output streamed while it runs. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type * as z from 'zod';
import type { ToolDeps } from '../context.js';
import { instrument } from '../instrument.js';
import { renderRun } from '../render.js';
import { toolResult } from '../results.js';
import { runStreamed } from '../run.js';
import { RunCommandInput, RunResultOutput } from '../schemas.js';

export function registerRunCommand(server: McpServer, deps: ToolDeps): void {
  server.registerTool(
    'run_command',
    {
      title: 'Run a command in a sandbox',
      description:
        'Runs an argv (e.g. ["sh", "-c", "ls | wc -l"]) in a fresh, locked-down container of a template ' +
        '(default bash) with optional input files, and returns exit code, stdout and stderr. Output streams as ' +
        'log notifications while it runs.',
      inputSchema: RunCommandInput,
      outputSchema: RunResultOutput,
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    instrument('run_command', deps, async (args: z.infer<typeof RunCommandInput>, extra) => {
      const template = args.template ?? (args.image === undefined ? 'bash' : undefined);
      const result = await runStreamed(deps, { ...args, ...(template ? { template } : {}) }, extra);
      return toolResult(RunResultOutput, result, renderRun(result));
    }),
  );
}
