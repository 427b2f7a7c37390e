/**
 * DNS-rebinding protection: a request whose Host header names another host is refused. On a
 * loopback bind the allowed names are the loopback ones; elsewhere they come from config
 * (`server.allowedHosts`).
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
