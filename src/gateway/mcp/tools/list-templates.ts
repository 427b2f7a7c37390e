/** list_templates: the languages this caller may use, with their images, libraries and limits. */
import type { ToolSpec } from '../tool-spec.js';
import { principalOf } from '../context.js';
import { toolResult } from '../results.js';
import { ListTemplatesOutput, type ToolSchemas } from '../schemas.js';
import { READ_ANNOTATIONS } from './get-run.js';

export function listTemplatesTool(schemas: ToolSchemas): ToolSpec {
  return {
    name: 'list_templates',
    title: 'List templates',
    description: 'The languages (templates) this caller may run, with image, libraries and default limits.',
    input: schemas.none,
    output: ListTemplatesOutput,
    annotations: READ_ANNOTATIONS,
    handler: (deps) => (_args: unknown, extra) => {
      const templates = deps.service.templates(principalOf(extra, deps));
      const text = templates
        .map(
          (t) =>
            `${t.name} (${t.image}): ${t.description}; with ${t.libraries.join(', ')}; cpu ${t.defaults.cpu}, memory ${t.defaults.memory}, ${t.defaults.timeoutSeconds}s`,
        )
        .join('\n');
      return Promise.resolve(
        toolResult(
          ListTemplatesOutput,
          { templates: templates.map((t) => ({ ...t })) },
          text || 'no templates are allowed for this caller',
        ),
      );
    },
  };
}
