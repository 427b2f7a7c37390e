/**
 * Bearer auth for /mcp, /metrics and the REST API: the principal goes on `req.auth` (where the MCP
 * transport finds it); a refusal is a 401 (or 403 insufficient_scope) with `WWW-Authenticate` and
 * a JSON body.
 */
import type { NextFunction, Request, Response } from 'express';
import { authInfoFor, type Authenticator } from '../auth.js';
import { toAppError } from '../../shared/errors.js';
import { sendError } from './errors.js';

export function requireAuth(authenticator: Authenticator) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const header = req.headers.authorization;
    try {
      (req as Request & { auth?: unknown }).auth = authInfoFor(await authenticator.verify(header));
    } catch (e) {
      const err = toAppError(e);
      if (err.code === 'UNAUTHORIZED' || err.code === 'FORBIDDEN') {
        res.setHeader('WWW-Authenticate', authenticator.challenge(header, err));
      }
      return sendError(req, res, err);
    }
    next();
  };
}
