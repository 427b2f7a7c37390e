/** run_code: code in a language, in one fresh sandbox; output streamed while it runs. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type * as z from 'zod';
import { AppError } from '../../../shared/errors.js';
import type { ToolDeps } from '../context.js';
import { instrument } from '../instrument.js';
import { renderRun } from '../render.js';
import { toolResult } from '../results.js';
import { runStreamed } from '../run.js';
import { RunCodeInput, RunResultOutput } from '../schemas.js';

export function registerRunCode(server: McpServer, deps: ToolDeps): void {
  server.registerTool(
    'run_code',
    {
      title: 'Run code in a sandbox',
      description:
        'Runs code in a fresh, locked-down container (no network, capped CPU/memory/time) and returns exit code, ' +
        'stdout and stderr. Output streams as log notifications (logger stdout/stderr) while it runs. ' +
        'Call list_templates for the languages and limits.',
      inputSchema: RunCodeInput,
      outputSchema: RunResultOutput,
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    instrument('run_code', deps, async (args: z.infer<typeof RunCodeInput>, extra) => {
      const { language, template, ...rest } = args;
      if (language !== undefined && template !== undefined && language !== template) {
        throw new AppError('INVALID_REQUEST', `language "${language}" and template "${template}" disagree`, {
          violations: [
            { field: 'template', message: 'give language or template, or the same value in both' },
          ],
          hint: 'send only language',
        });
      }
      const result = await runStreamed(deps, { ...rest, template: language ?? template ?? 'python' }, extra);
      return toolResult(RunResultOutput, result, renderRun(result));
    }),
  );
}
