/** `sandpit serve`: MCP over Streamable HTTP on /mcp, plus /health and /metrics. */
import { LOCAL_PRINCIPAL } from '../gateway/principal.js';
import { createAuthenticator } from '../gateway/auth.js';
import { isLoopback } from '../gateway/http/host-validation.js';
import { AppError } from '../shared/errors.js';
import { parse, printHelp } from './args.js';
import { aborted, packageVersion, shutdownSignal, toPort } from './process.js';
import { instanceIdOf } from '../config/instance.js';
import { loadOAuth } from './oauth.js';
import { serveGatewayHttp } from './gateway-http.js';
import { loadContext, wireBackend } from './wiring.js';

export const SERVE_USAGE = `
usage: sandpit serve [options]

Serves MCP over Streamable HTTP at http://HOST:PORT/mcp, the REST API (/sessions, /runs; its
OpenAPI document at /openapi.json) with the session WebSocket (/sessions/ID/exec/ws), GET /health
(no auth) and GET /metrics.
Binds 127.0.0.1 by default; binding any other address needs a token (MCP_AUTH_TOKEN or auth.tokens)
or OAuth (auth.oauth: JWT access tokens; /.well-known/oauth-protected-resource/mcp describes it).
Every run is recorded in the audit file (audit.file; read it with \`sandpit audit\`).

options:
      --host HOST         address to bind (default: server.host, 127.0.0.1)
      --port PORT         port (default: server.port / MCP_PORT, 8080; 0 picks a free one)
      --stateless         a fresh MCP server per request, no sessions (default: server.stateless)
      --log-level LEVEL   fatal, error, warn, info, debug, trace or silent (default: logging.level)
      --config PATH       config file (YAML or JSON); also SANDPIT_CONFIG
  -h, --help              this text
`;

const OPTIONS = {
  host: { type: 'string' },
  port: { type: 'string' },
  stateless: { type: 'boolean' },
  'log-level': { type: 'string' },
  config: { type: 'string' },
} as const;

export async function serveCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, OPTIONS, SERVE_USAGE);
  if (values.help) {
    printHelp(SERVE_USAGE);
    return 0;
  }
  const ctx = loadContext({
    configPath: values.config,
    logFd: 1,
    ...(values['log-level'] !== undefined ? { logLevel: values['log-level'] } : {}),
  });
  const { config, logger } = ctx;
  const host = values.host ?? config.server.host;
  const port = values.port !== undefined ? toPort(values.port, '--port') : config.server.port;
  const stateless = values.stateless ?? config.server.stateless;
  const authenticator = createAuthenticator(config.auth, LOCAL_PRINCIPAL, loadOAuth(config.auth.oauth));
  if (!isLoopback(host) && !authenticator.required) {
    throw new AppError(
      'CONFIG_INVALID',
      `refusing to serve on ${host} without a token: anyone who can reach it could run code`,
      {
        hint: 'set MCP_AUTH_TOKEN (or auth.token / auth.tokens in the config file), or bind 127.0.0.1',
      },
    );
  }
  const { service, metrics } = await wireBackend(ctx, {
    defaultMetrics: true,
    tolerateEngineDown: true,
    // A restart of this server (the same instance id) adopts its live sessions.
    instanceId: instanceIdOf(ctx.config, process.env),
  });
  // The sessions an earlier run of this server left (same instance id) are its own again.
  await service.sessions.adopt().catch((e: unknown) => {
    ctx.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'adopting earlier sessions failed');
  });
  const http = await serveGatewayHttp(
    { config, logger, service, metrics, authenticator, version: packageVersion() },
    { host, port, stateless },
  );
  logger.info({ url: `${http.url}/mcp`, stateless, auth: authenticator.required }, 'MCP server listening');

  await aborted(shutdownSignal().signal);
  logger.info('shutting down');
  await http.close();
  await service.shutdown();
  return 0;
}
