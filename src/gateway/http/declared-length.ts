/**
 * A request that declares a body over the limit is refused at once, before a byte of it is read,
 * and its connection is closed: a client cannot hold a connection by promising a large body.
 */
import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../../shared/errors.js';
import { sendError } from './errors.js';

export function refuseDeclaredOverLimit(limitBytes: number, limitNote: string) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (!(declared > limitBytes)) return next();
    res.setHeader('Connection', 'close');
    sendError(
      req,
      res,
      new AppError(
        'TOO_LARGE',
        `request body of ${declared} bytes is over the limit of ${limitBytes} bytes`,
        {
          violations: [{ field: '(request body)', message: 'too large', limit: limitBytes }],
          hint: `send less code, files or stdin; ${limitNote}`,
        },
      ),
    );
  };
}
