/**
 * DNS-rebinding and cross-origin protection: a request whose Host header names another host is
 * refused (on a loopback bind the allowed names are the loopback ones; elsewhere they come from
 * config, `server.allowedHosts`), and so is one that a page of another origin sent (its Origin
 * header; MCP's Streamable HTTP transport requires servers to check it). Clients that are not
 * browsers send no Origin.
 */
import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../../shared/errors.js';
import { sendError } from './errors.js';

export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'];

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** The hostname of a Host header value (without port), lower-cased; undefined when malformed. */
export function hostnameOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  try {
    return new URL(`http://${header}`).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

/** The refusal of a Host header that names none of the allowed hosts; undefined when it does. */
export function hostRefusal(allowed: ReadonlySet<string>, header: string | undefined): AppError | undefined {
  const hostname = hostnameOf(header);
  if (hostname !== undefined && allowed.has(hostname)) return undefined;
  return new AppError('FORBIDDEN', `Host header "${header ?? ''}" is not allowed`, {
    hint: `use one of ${[...allowed].join(', ')}, or add the name to server.allowedHosts`,
  });
}

export function allowedHostSet(allowedHosts: readonly string[]): ReadonlySet<string> {
  return new Set(allowedHosts.map((h) => h.toLowerCase()));
}

export function hostValidation(allowedHosts: readonly string[]) {
  const allowed = allowedHostSet(allowedHosts);
  return (req: Request, res: Response, next: NextFunction): void => {
    const refusal = hostRefusal(allowed, req.headers.host);
    if (!refusal) return next();
    sendError(req, res, refusal);
  };
}

/** Whether `origin` (an Origin header) is the origin of this server as `host` (the Host header) names it. */
export function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    const from = new URL(origin);
    if (from.protocol !== 'http:' && from.protocol !== 'https:') return false;
    return from.host === new URL(`${from.protocol}//${host}`).host;
  } catch {
    return false;
  }
}

/** The refusal of a request a page of another origin sent (`null` included); undefined when it may go on. */
export function originRefusal(origin: string | undefined, host: string | undefined): AppError | undefined {
  if (origin === undefined || sameOrigin(origin, host)) return undefined;
  return new AppError('FORBIDDEN', `Origin "${origin}" is not this server's`, {
    violations: [{ field: 'Origin', message: 'a page of another origin may not call this gateway' }],
    hint: 'call the gateway from a client that is not a browser page (it sends no Origin), or from a page it serves',
  });
}

export function originValidation() {
  return (req: Request, res: Response, next: NextFunction): void => {
    const refusal = originRefusal(req.headers.origin, req.headers.host);
    if (!refusal) return next();
    sendError(req, res, refusal);
  };
}
