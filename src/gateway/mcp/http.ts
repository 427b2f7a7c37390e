/** The /mcp routes for the HTTP app, stateful or stateless (config `server.stateless`). */
import type { McpHttp } from '../http/app.js';
import type { ToolDeps } from './context.js';
import { statefulMcpHttp, type StatefulOptions } from './http-stateful.js';
import { statelessMcpHttp } from './http-stateless.js';

export function createMcpHttp(
  deps: ToolDeps,
  options: { stateless: boolean } & Partial<StatefulOptions>,
): McpHttp {
  if (options.stateless) return statelessMcpHttp(deps);
  return statefulMcpHttp(deps, {
    maxSessions: options.maxSessions ?? 256,
    idleMs: options.idleMs ?? 30 * 60_000,
  });
}
