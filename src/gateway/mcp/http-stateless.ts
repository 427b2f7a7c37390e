/**
 * Stateless Streamable HTTP: a new server and transport for every POST (a stateless transport cannot
 * be reused: the SDK answers a second request with an empty 500), closed when the response closes,
 * which also aborts a run whose client went away. GET and DELETE have nothing to act on: 405.
 */
import type { Request, Response } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpHttp } from '../http/app.js';
import { jsonRpcError } from '../http/errors.js';
import { principalOfRequest, type ToolDeps } from './context.js';
import { InflightCalls } from './inflight.js';
import type { ToolCatalog } from './catalog.js';
import { createMcpServer } from './server.js';
import type { TaskIndex } from './tasks.js';

export function statelessMcpHttp(deps: ToolDeps, catalog: ToolCatalog, tasks: TaskIndex): McpHttp {
  const inflight = new InflightCalls();
  const open = new Set<() => Promise<void>>();
  const notAllowed = (_req: Request, res: Response): void => {
    res
      .status(405)
      .setHeader('Allow', 'POST')
      .json(jsonRpcError(-32000, 'Method not allowed: this server is stateless'));
  };
  return {
    async post(req: Request, res: Response) {
      const caller = principalOfRequest(req, deps);
      const principal = caller.id;
      const cancelled = inflight.cancelFrom(principal, req.body);
      if (cancelled > 0) deps.logger.debug({ principal, cancelled }, 'client cancelled calls in flight');
      const server = createMcpServer(deps, catalog, { principal: caller, index: tasks });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      const close = (): Promise<void> => server.close().catch(() => undefined);
      const forget = inflight.track(principal, req.body, () => void close());
      open.add(close);
      res.on('close', () => {
        forget();
        open.delete(close);
        void close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    },
    get: notAllowed,
    delete: notAllowed,
    async close() {
      await Promise.all([...open].map((c) => c()));
    },
    get sessions() {
      return 0;
    },
  };
}
