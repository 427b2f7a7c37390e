/** MCP over stdio: stdout carries only JSON-RPC (logs go to stderr); ends when stdin ends or `signal` aborts. */
import type { Readable, Writable } from 'node:stream';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

export async function serveStdio(
  server: McpServer,
  options: { signal: AbortSignal; stdin?: Readable; stdout?: Writable },
): Promise<void> {
  const stdin = options.stdin ?? process.stdin;
  const before = server.server.onclose;
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = () => {
      before?.();
      resolve();
    };
  });
  const close = (): void => void server.close();
  await server.connect(new StdioServerTransport(stdin, options.stdout ?? process.stdout));
  stdin.once('end', close);
  stdin.once('close', close);
  options.signal.addEventListener('abort', close, { once: true });
  if (options.signal.aborted) close();
  await closed;
}
