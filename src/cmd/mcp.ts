/** `sandpit mcp`: the MCP server over stdio, for Claude Code, Cursor and other local clients. */
import { bodyLimitFor } from '../gateway/http/app.js';
import { LOCAL_PRINCIPAL } from '../gateway/principal.js';
import { buildToolCatalog, createMcpServer } from '../gateway/mcp/server.js';
import { serveStdio } from '../gateway/mcp/stdio.js';
import { parse, printHelp } from './args.js';
import { packageVersion, shutdownSignal } from './process.js';
import { loadContext, wireBackend } from './wiring.js';

export const MCP_USAGE = `
usage: sandpit mcp [options]

Serves MCP over stdio: stdout carries only JSON-RPC, logs go to stderr. Register it with a client:

  claude mcp add sandpit -- npx -y sandpit-mcp mcp

(sandpit-mcp is this command's npm package. Until it is published, install it from a packed
tarball, npm install -g ./sandpit-mcp-<version>.tgz, and register the command itself:
claude mcp add sandpit -- sandpit mcp)

Tools: run_code, run_command, get_run, cancel_run, list_templates, sandbox_health, and the seed
servers' execute_python_code and check_sandbox_health (server.seedTools: false hides these two;
see docs/mcp.md). Every run is recorded in the audit file (audit.file; read it with
\`sandpit audit\`).

options:
      --log-level LEVEL   fatal, error, warn, info, debug, trace or silent (default: logging.level)
      --config PATH       config file (YAML or JSON); also SANDPIT_CONFIG
  -h, --help              this text
`;

const OPTIONS = {
  'log-level': { type: 'string' },
  config: { type: 'string' },
} as const;

export async function mcpCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, OPTIONS, MCP_USAGE);
  if (values.help) {
    printHelp(MCP_USAGE);
    return 0;
  }
  const ctx = loadContext({
    configPath: values.config,
    logFd: 2,
    ...(values['log-level'] !== undefined ? { logLevel: values['log-level'] } : {}),
  });
  const { service, metrics } = await wireBackend(ctx, { tolerateEngineDown: true });
  const deps = {
    service,
    logger: ctx.logger,
    metrics,
    defaultPrincipal: LOCAL_PRINCIPAL,
    version: packageVersion(),
  };
  const server = createMcpServer(deps, buildToolCatalog(deps, { seedTools: ctx.config.server.seedTools }));
  const stop = shutdownSignal();
  ctx.logger.info({ pid: process.pid }, 'MCP server on stdio');
  try {
    await serveStdio(server, {
      signal: stop.signal,
      maxLineBytes: bodyLimitFor(ctx.config.sandbox.maxRequestBytes),
    });
  } finally {
    stop.dispose();
    // Nobody could reach this server's sessions again: they end with it.
    await service.shutdown({ endSessions: true });
    ctx.logger.info('MCP server stopped');
  }
  return 0;
}
