/**
 * Bearer auth for /mcp and /metrics: the principal goes on `req.auth` (where the MCP transport finds
 * it); a refusal is a 401 with `WWW-Authenticate` and a JSON body.
 */
import type { NextFunction, Request, Response } from 'express';
import { authInfoFor, wwwAuthenticate, type Authenticator } from '../auth.js';
import { toAppError } from '../../shared/errors.js';
import { sendError } from './errors.js';

export function requireAuth(authenticator: Authenticator) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const header = req.headers.authorization;
    try {
      (req as Request & { auth?: unknown }).auth = authInfoFor(authenticator.authenticate(header));
    } catch (e) {
      const err = toAppError(e);
      res.setHeader('WWW-Authenticate', wwwAuthenticate(header, err));
      return sendError(req, res, err);
    }
    next();
  };
}
