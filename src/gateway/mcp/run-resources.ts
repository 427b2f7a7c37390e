/**
 * A run's output files as MCP resources under one template, `sandpit://runs/{id}/files/{+path}`:
 * `resources/read` serves a file for as long as the gateway keeps the run's record, to its owner
 * only; the template's list is the caller's recent runs' files. A tool result shows the images
 * inline and links the rest (runFileContent).
 */
import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import type { OutputFile } from '../../api/outputs.js';
import { AppError } from '../../shared/errors.js';
import type { Principal } from '../principal.js';
import { principalOf, type ToolDeps } from './context.js';
import { resourceContents } from './file-content.js';
import { asProtocolErrors } from './results.js';
import { fileUri, parseFileUri, RUN_FILE_TEMPLATE } from './session-files.js';

export function registerRunResources(server: McpServer, deps: ToolDeps): void {
  server.registerResource(
    'run-file',
    new ResourceTemplate(RUN_FILE_TEMPLATE, {
      list: (extra) => ({
        resources: deps.service.runFiles.listed(principalOf(extra, deps)).map(({ runId, file }) => ({
          uri: fileUri('runs', runId, file.path),
          name: `${runId}/${file.path}`,
          mimeType: file.mimeType,
          size: file.bytes,
        })),
      }),
    }),
    {
      title: 'A file a run returned',
      description: 'An output file of a run (run_code outputs), kept as long as the run is',
    },
    asProtocolErrors(async (uri, _vars, extra) => {
      const file = parseFileUri('runs', uri.href);
      if (!file) {
        throw new AppError('INVALID_REQUEST', `not a run file: ${uri.href.slice(0, 200)}`, {
          hint: `expected ${RUN_FILE_TEMPLATE}`,
        });
      }
      const read = await deps.service.runFiles.read(file.id, file.path, principalOf(extra, deps));
      return { contents: [resourceContents(uri.href, file.path, read.data)] };
    }),
  );
}

/**
 * A returned file as tool result content: an image the result shows inline as image content,
 * any other file (or an image past a cap, or one gone since) as a resource_link.
 */
export async function runFileContent(
  deps: ToolDeps,
  runId: string,
  file: OutputFile,
  principal: Principal,
): Promise<ContentBlock> {
  if (file.delivery === 'image') {
    const read = await deps.service.runFiles.read(runId, file.path, principal).catch(() => undefined);
    if (read) return { type: 'image', data: read.data.toString('base64'), mimeType: file.mimeType };
  }
  return {
    type: 'resource_link',
    uri: fileUri('runs', runId, file.path),
    name: file.path,
    mimeType: file.mimeType,
    size: file.bytes,
    ...(file.note ? { description: file.note } : {}),
  };
}
