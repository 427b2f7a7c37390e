/**
 * A session's files as MCP resources under one template, readable by their owner, and
 * `resources/subscribe` on one: the runner's inotify watch sends `notifications/resources/updated`
 * when it changes. Watches end with the MCP session (the server's close) or on unsubscribe.
 */
import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { AppError } from '../../shared/errors.js';
import { principalOf, type ToolDeps, type ToolExtra } from './context.js';
import { asText, collect, imageType, parseSessionFileUri, SESSION_FILE_TEMPLATE } from './session-files.js';

function fileOf(uri: string): { sessionId: string; path: string } {
  const file = parseSessionFileUri(uri);
  if (!file) {
    throw new AppError('INVALID_REQUEST', `not a session file: ${uri.slice(0, 200)}`, {
      hint: `expected ${SESSION_FILE_TEMPLATE}`,
    });
  }
  return file;
}

export function registerSessionResources(server: McpServer, deps: ToolDeps): void {
  server.registerResource(
    'session-file',
    new ResourceTemplate(SESSION_FILE_TEMPLATE, { list: undefined }),
    { title: 'A file in a session', description: "A file of a session's workspace (sandbox_create)" },
    async (uri, _vars, extra) => {
      const { sessionId, path } = fileOf(uri.href);
      const file = await deps.service.sessions.readFile(sessionId, principalOf(extra, deps), { path });
      const data = await collect(file.data);
      const text = imageType(data) ? undefined : asText(data);
      return {
        contents: [
          text !== undefined
            ? { uri: uri.href, mimeType: 'text/plain', text }
            : {
                uri: uri.href,
                mimeType: imageType(data) ?? 'application/octet-stream',
                blob: data.toString('base64'),
              },
        ],
      };
    },
  );
  server.server.registerCapabilities({ resources: { subscribe: true } });
  const watches = new Map<string, () => void>();
  server.server.setRequestHandler(SubscribeRequestSchema, async (request, extra: ToolExtra) => {
    const { uri } = request.params;
    if (watches.has(uri)) return {};
    const { sessionId, path } = fileOf(uri);
    const stop = await deps.service.sessions.watch(sessionId, principalOf(extra, deps), path, () => {
      void server.server.sendResourceUpdated({ uri }).catch(() => undefined);
    });
    watches.set(uri, stop);
    return {};
  });
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
