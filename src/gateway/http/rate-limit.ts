/**
 * Requests per second, counted per principal (its id, set by the auth middleware; without tokens,
 * per client address), so one token cannot take the gateway's CPU from the others. Over the limit:
 * 429 with Retry-After and the error body of the route.
 */
import type { Request, RequestHandler } from 'express';
import { ipKeyGenerator, rateLimit } from 'express-rate-limit';
import { principalFromAuthInfo } from '../auth.js';
import { AppError } from '../../shared/errors.js';
import { sendError } from './errors.js';

export interface RateLimitOptions {
  /** Requests one principal may make in each second. */
  perSecond: number;
  /** The id of the principal of callers without a token (counted per address instead). */
  anonymousId: string;
}

export function principalRateLimit(options: RateLimitOptions): RequestHandler {
  const keyOf = (req: Request): string => {
    const principal = principalFromAuthInfo(
      (req as Request & { auth?: { extra?: Record<string, unknown> } }).auth,
    );
    if (principal && principal.id !== options.anonymousId) return principal.id;
    return `${options.anonymousId}@${ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? '?')}`;
  };
  return rateLimit({
    windowMs: 1000,
    limit: options.perSecond,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator: keyOf,
    handler: (req, res) =>
      sendError(
        req,
        res,
        new AppError(
          'BUSY',
          `busy, retry later: more than ${options.perSecond} requests a second from this caller`,
          {
            hint: 'send fewer requests at once (server.maxRequestsPerSecond)',
          },
        ),
      ),
  });
}
