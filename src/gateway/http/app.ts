/**
 * The gateway's HTTP app (express 5): Host-header validation, `GET /health`, Origin validation, `GET /openapi.json`
 * and, with OAuth, the Protected Resource Metadata without auth, bearer auth on `/mcp`, `/metrics` and the REST API (`/sessions`, `/runs`), a JSON
 * body limit derived from policy, and JSON errors only. The MCP routes are given in `mcp`
 * (src/gateway/mcp owns the SDK).
 */
import express, {
  type Express,
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
} from 'express';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import type { Authenticator } from '../auth.js';
import type { SandpitService } from '../service.js';
import { requireAuth } from './auth.js';
import { refuseDeclaredOverLimit } from './declared-length.js';
import { errorHandler, notFound } from './errors.js';
import { healthRoute } from './health.js';
import { hostValidation, LOOPBACK_HOSTS, originValidation } from './host-validation.js';
import { metricsRoute } from './metrics.js';
import { openApiDocument } from './openapi.js';
import { principalRateLimit } from './rate-limit.js';
import { mcpJsonBody, requireJson } from './request.js';
import { runRoutes } from './rest-runs.js';
import { sessionRoutes } from './rest-sessions.js';

/** The port the MCP transport plugs into: its three routes, and its own shutdown. */
export interface McpHttp {
  post: RequestHandler;
  get: RequestHandler;
  delete: RequestHandler;
  /** Closes every session and in-flight request (which cancels their runs). */
  close(): Promise<void>;
  readonly sessions: number;
}

export interface HttpAppDeps {
  service: SandpitService;
  metrics: Metrics;
  logger: Logger;
  authenticator: Authenticator;
  mcp: McpHttp;
  /** Largest JSON body accepted on /mcp. */
  bodyLimitBytes: number;
  /** Where the body limit comes from, for the error's hint. */
  limitNote: string;
  /** Host names accepted in the Host header; undefined turns the check off. */
  allowedHosts: readonly string[] | undefined;
  /** Requests one principal may make each second on /mcp and /metrics. */
  maxRequestsPerSecond: number;
  /** The principal of callers without a token, whose limits count per client address. */
  anonymousId: string;
  version: string;
}

/** Room for the JSON-RPC envelope, JSON escaping and base64 around the policy's request size. */
export function bodyLimitFor(maxRequestBytes: number): number {
  return 2 * maxRequestBytes + 64 * 1024;
}

export function createHttpApp(deps: HttpAppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.use(requestLog(deps.logger, deps.metrics));
  // A local probe (kubelet, curl on the host) names a loopback host; /health shows no run data.
  const health = healthRoute(deps.service, deps.version);
  if (deps.allowedHosts)
    app.get('/health', hostValidation([...deps.allowedHosts, ...LOOPBACK_HOSTS]), health);
  else app.get('/health', health);
  if (deps.allowedHosts) app.use(hostValidation(deps.allowedHosts));
  const oauth = deps.authenticator.oauth;
  // RFC 9728: what a client needs before it has a token, so without auth.
  if (oauth) app.get([...oauth.metadataPaths], (_req, res) => void res.json(oauth.metadata));
  app.use(originValidation());
  const auth = requireAuth(deps.authenticator);
  const limit = principalRateLimit({ perSecond: deps.maxRequestsPerSecond, anonymousId: deps.anonymousId });
  app.get('/metrics', auth, limit, metricsRoute(deps.metrics));
  app.post(
    '/mcp',
    refuseDeclaredOverLimit(deps.bodyLimitBytes, deps.limitNote),
    auth,
    limit,
    mcpJsonBody(deps.bodyLimitBytes),
    deps.mcp.post,
  );
  app.get('/mcp', auth, limit, deps.mcp.get);
  app.delete('/mcp', auth, limit, deps.mcp.delete);
  const openapi = openApiDocument(deps.service.policy, deps.version);
  app.get('/openapi.json', (_req, res) => void res.json(openapi));
  const json = requireJson(deps.bodyLimitBytes);
  app.use(['/sessions', '/runs'], auth, limit);
  app.use(sessionRoutes(deps.service, json), runRoutes(deps.service, json));
  app.use(notFound);
  app.use(errorHandler(deps.logger, deps.limitNote));
  return app;
}

/**
 * One debug line per request: method, path, status, time; never headers or bodies. Counted by
 * route pattern (`/sessions/:id`), never by path, so the labels stay bounded.
 */
function requestLog(logger: Logger, metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = performance.now();
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path;
      metrics.httpRequests.inc({
        method: req.method,
        route: typeof route === 'string' ? route : 'unmatched',
        status: String(res.statusCode),
      });
      logger.debug(
        {
          method: req.method,
          path: req.path,
          status: res.statusCode,
          ms: Math.round(performance.now() - started),
        },
        'http request',
      );
    });
    next();
  };
}
