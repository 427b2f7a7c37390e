/** list_templates: the languages this caller may use, with their images and limits. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { principalOf, type ToolDeps } from '../context.js';
import { instrument } from '../instrument.js';
import { toolResult } from '../results.js';
import { ListTemplatesOutput, NoInput } from '../schemas.js';

export function registerListTemplates(server: McpServer, deps: ToolDeps): void {
  server.registerTool(
    'list_templates',
    {
      title: 'List templates',
      description:
        'Lists the languages (templates) this caller may run, with their image and default limits.',
      inputSchema: NoInput,
      outputSchema: ListTemplatesOutput,
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    instrument('list_templates', deps, async (_args: unknown, extra) => {
      const templates = deps.service.templates(principalOf(extra, deps));
      const text = templates
        .map(
          (t) =>
            `${t.name} (${t.image}): ${t.description}; with ${t.libraries.join(', ')}; cpu ${t.defaults.cpu}, memory ${t.defaults.memory}, ${t.defaults.timeoutSeconds}s`,
        )
        .join('\n');
      return Promise.resolve(
        toolResult(ListTemplatesOutput, { templates }, text || 'no templates are allowed for this caller'),
      );
    }),
  );
}
