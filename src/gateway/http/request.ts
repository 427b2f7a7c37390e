/** What the REST routes read off a request: its principal, a JSON body (only as JSON), a wildcard path. */
import { isUtf8 } from 'node:buffer';
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

/**
 * express.json with the gateway's rules: at most `limitBytes`, and UTF-8 that is valid (body-parser
 * would decode bytes that are not as U+FFFD, and a program's code would run changed, silently).
 */
export function jsonBody(limitBytes: number, options: { strict?: boolean } = {}) {
  return express.json({
    limit: limitBytes,
    ...options,
    verify: (_req, _res, buf, encoding) => {
      if (/^utf-?8$/i.test(encoding) && !isUtf8(buf)) {
        throw new AppError('INVALID_REQUEST', 'the request body is not valid UTF-8', {
          violations: [{ field: '(request body)', message: 'not valid UTF-8' }],
          hint: 'send JSON as UTF-8; send bytes that are not text as base64 (a file with encoding: base64)',
        });
      }
    },
  });
}

/** The 415 of a request whose body is not declared JSON; undefined when it is. */
function notJson(req: Request): AppError | undefined {
  if (req.is('application/json')) return undefined;
  return new AppError(
    'UNSUPPORTED_MEDIA_TYPE',
    `expected Content-Type: application/json, got ${req.headers['content-type'] ?? 'none'}`,
    {
      violations: [{ field: 'Content-Type', message: 'expected application/json' }],
      hint: 'send the body as JSON with -H "Content-Type: application/json"',
    },
  );
}

/** A JSON body, parsed: another Content-Type is a 415 naming it, before anything is read. */
export function requireJson(limitBytes: number) {
  const parse = jsonBody(limitBytes, { strict: false });
  return (req: Request, res: Response, next: NextFunction): void => {
    const refusal = notJson(req);
    if (refusal) return next(refusal);
    parse(req, res, next);
  };
}

/**
 * MCP's POST body as JSON (a JSON-RPC message), refused with a 415 otherwise: else no body is
 * parsed and the transport answers as if an initialize were missing.
 */
export function mcpJsonBody(limitBytes: number) {
  const parse = jsonBody(limitBytes);
  return (req: Request, res: Response, next: NextFunction): void => {
    const refusal = notJson(req);
    if (refusal) return next(refusal);
    parse(req, res, next);
  };
}

/** A named route parameter as one string. */
export function param(req: Request, name: string): string {
  const value = (req.params as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value.join('/') : (value ?? '');
}
