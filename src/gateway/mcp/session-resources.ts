/**
 * A session's files as MCP resources under one template, readable by their owner, and
 * `resources/subscribe` on one: the runner's inotify watch sends `notifications/resources/updated`
 * when it changes. Watches end with the MCP session (the server's close) or on unsubscribe.
 */
import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { AppError } from '../../shared/errors.js';
import { principalOf, type ToolDeps, type ToolExtra } from './context.js';
import { collect, resourceContents } from './file-content.js';
import { asProtocolErrors } from './results.js';
import { parseFileUri, SESSION_FILE_TEMPLATE } from './session-files.js';

function fileOf(uri: string): { sessionId: string; path: string } {
  const file = parseFileUri('sessions', uri);
  if (!file) {
    throw new AppError('INVALID_REQUEST', `not a session file: ${uri.slice(0, 200)}`, {
      hint: `expected ${SESSION_FILE_TEMPLATE}`,
    });
  }
  return { sessionId: file.id, path: file.path };
}

export function registerSessionResources(server: McpServer, deps: ToolDeps): void {
  server.registerResource(
    'session-file',
    new ResourceTemplate(SESSION_FILE_TEMPLATE, { list: undefined }),
    { title: 'A file in a session', description: "A file of a session's workspace (sandbox_create)" },
    asProtocolErrors(async (uri, _vars, extra) => {
      const { sessionId, path } = fileOf(uri.href);
      const file = await deps.service.sessions.readFile(sessionId, principalOf(extra, deps), { path });
      return { contents: [resourceContents(uri.href, file.entry.path, await collect(file.data))] };
    }),
  );
  server.server.registerCapabilities({ resources: { subscribe: true } });
  const watches = new Map<string, () => void>();
  server.server.setRequestHandler(
    SubscribeRequestSchema,
    asProtocolErrors(async (request, extra: ToolExtra) => {
      const { uri } = request.params;
      if (watches.has(uri)) return {};
      const { sessionId, path } = fileOf(uri);
      const stop = await deps.service.sessions.watch(sessionId, principalOf(extra, deps), path, () => {
        void server.server.sendResourceUpdated({ uri }).catch(() => undefined);
      });
      watches.set(uri, stop);
      return {};
    }),
  );
  server.server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    watches.get(request.params.uri)?.();
    watches.delete(request.params.uri);
    return {};
  });
  const closed = server.server.onclose;
  server.server.onclose = () => {
    for (const stop of watches.values()) stop();
    watches.clear();
    closed?.();
  };
}
