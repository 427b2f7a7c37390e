/** The /mcp routes for the HTTP app, stateful or stateless (config `server.stateless`). */
import type { Request, RequestHandler, Response } from 'express';
import type { McpHttp } from '../http/app.js';
import { jsonRpcError } from '../http/errors.js';
import type { CatalogOptions } from './catalog.js';
import type { ToolDeps } from './context.js';
import { DEFAULT_STATEFUL, statefulMcpHttp, type StatefulOptions } from './http-stateful.js';
import { statelessMcpHttp } from './http-stateless.js';
import { buildToolCatalog } from './server.js';
import { TaskIndex } from './tasks.js';

export function createMcpHttp(
  deps: ToolDeps,
  options: { stateless: boolean } & Partial<StatefulOptions> & CatalogOptions,
): McpHttp {
  const { stateless, seedTools, ...sessions } = options;
  // One tools/list for every session and request.
  const catalog = buildToolCatalog(deps, seedTools === undefined ? {} : { seedTools });
  // Tasks are the process's: a stateless request, or another session of the same principal, lists them.
  const tasks = new TaskIndex();
  const mcp = stateless
    ? statelessMcpHttp(deps, catalog, tasks)
    : statefulMcpHttp(deps, catalog, tasks, { ...DEFAULT_STATEFUL, ...sessions });
  return {
    post: refuseBatches(mcp.post),
    get: mcp.get,
    delete: mcp.delete,
    close: () => mcp.close(),
    get sessions() {
      return mcp.sessions;
    },
  };
}

/** Protocol 2025-06-18 removed JSON-RPC batches; the server speaks only later versions' rules. */
function refuseBatches(post: RequestHandler): RequestHandler {
  return (req: Request, res: Response, next) => {
    if (!Array.isArray(req.body)) return post(req, res, next);
    res
      .status(400)
      .json(
        jsonRpcError(
          -32600,
          'Invalid Request: JSON-RPC batches are not accepted (MCP 2025-06-18 removed them); send one message per request',
        ),
      );
  };
}
