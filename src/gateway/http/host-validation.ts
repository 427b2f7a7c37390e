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

export function hostValidation(allowedHosts: readonly string[]) {
  const allowed = new Set(allowedHosts.map((h) => h.toLowerCase()));
  return (req: Request, res: Response, next: NextFunction): void => {
    const hostname = hostnameOf(req.headers.host);
    if (hostname !== undefined && allowed.has(hostname)) return next();
    sendError(
      req,
      res,
      new AppError('FORBIDDEN', `Host header "${req.headers.host ?? ''}" is not allowed`, {
        hint: `use one of ${[...allowed].join(', ')}, or add the name to server.allowedHosts`,
      }),
    );
  };
}
