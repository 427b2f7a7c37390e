/** The /mcp routes for the HTTP app, stateful or stateless (config `server.stateless`). */
import type { McpHttp } from '../http/app.js';
import type { CatalogOptions } from './catalog.js';
import type { ToolDeps } from './context.js';
import { statefulMcpHttp, type StatefulOptions } from './http-stateful.js';
import { statelessMcpHttp } from './http-stateless.js';
import { buildToolCatalog } from './server.js';

export function createMcpHttp(
  deps: ToolDeps,
  options: { stateless: boolean } & Partial<StatefulOptions> & CatalogOptions,
): McpHttp {
  // One tools/list for every session and request.
  const catalog = buildToolCatalog(deps, options);
  if (options.stateless) return statelessMcpHttp(deps, catalog);
  return statefulMcpHttp(deps, catalog, {
    maxSessions: options.maxSessions ?? 256,
    idleMs: options.idleMs ?? 30 * 60_000,
  });
}
