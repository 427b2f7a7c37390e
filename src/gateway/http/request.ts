/** What the REST routes read off a request: its principal, a JSON body (only as JSON), a wildcard path. */
import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError } from '../../shared/errors.js';
import { principalFromAuthInfo } from '../auth.js';
import type { Principal } from '../principal.js';

/** The principal the auth middleware put on the request (it runs before every REST route). */
export function principalOfRequest(req: Request): Principal {
  const principal = principalFromAuthInfo((req as { auth?: { extra?: Record<string, unknown> } }).auth);
  if (!principal) throw new AppError('UNAUTHORIZED', 'no principal on the request');
  return principal;
}

/** A JSON body, parsed: another Content-Type is a 415 naming it, before anything is read. */
export function requireJson(limitBytes: number) {
  const parse = express.json({ limit: limitBytes, strict: false });
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!req.is('application/json')) {
      next(
        new AppError(
          'UNSUPPORTED_MEDIA_TYPE',
          `expected Content-Type: application/json, got ${req.headers['content-type'] ?? 'none'}`,
          {
            violations: [{ field: 'Content-Type', message: 'expected application/json' }],
            hint: 'send the body as JSON with -H "Content-Type: application/json"',
          },
        ),
      );
      return;
    }
    parse(req, res, next);
  };
}

/** A named route parameter as one string. */
export function param(req: Request, name: string): string {
  const value = (req.params as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value.join('/') : (value ?? '');
}
