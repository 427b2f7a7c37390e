/** What every tool is given: the service, observability, and who calls when the transport carries no credentials. */
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { LoggingLevel, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { principalFromAuthInfo } from '../auth.js';
import type { Principal } from '../principal.js';
import type { SandpitService } from '../service.js';

export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface ToolDeps {
  service: SandpitService;
  logger: Logger;
  metrics: Metrics;
  /** The caller when the request carries no principal (stdio: the local user). */
  defaultPrincipal: Principal;
  version: string;
  /** The level the client asked for with logging/setLevel (per server, so per session); undefined: all. */
  clientLogLevel?: () => LoggingLevel | undefined;
}

const LEVELS: readonly LoggingLevel[] = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
];

/** Whether a log notification at `level` reaches this client (MCP logging/setLevel). */
export function clientWants(deps: ToolDeps, level: LoggingLevel): boolean {
  const floor = deps.clientLogLevel?.();
  return floor === undefined || LEVELS.indexOf(level) >= LEVELS.indexOf(floor);
}

/** The principal the HTTP auth layer attached to the request, or the transport's default. */
export function principalOf(extra: ToolExtra, deps: ToolDeps): Principal {
  return principalFromAuthInfo(extra.authInfo) ?? deps.defaultPrincipal;
}

/** The principal on an HTTP request (set by the auth middleware as `req.auth`), or the default. */
export function principalOfRequest(req: object, deps: ToolDeps): Principal {
  return (
    principalFromAuthInfo((req as { auth?: { extra?: Record<string, unknown> } }).auth) ??
    deps.defaultPrincipal
  );
}
