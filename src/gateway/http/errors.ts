/**
 * The HTTP boundary's one error mapping: AppError → status + JSON. On /mcp the body is a JSON-RPC
 * error (clients parse it as such); elsewhere `{ error: {code, message, hint, violations} }`.
 * Never HTML, never a stack trace.
 */
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../../observability/logger.js';
import { AppError, toAppError, type ErrorCode } from '../../shared/errors.js';

/** JSON-RPC codes for failures that happen before a message reaches the MCP server. */
const JSON_RPC_CODES: Partial<Record<ErrorCode, number>> = {
  INVALID_REQUEST: -32600,
  TOO_LARGE: -32600,
  UNSUPPORTED_MEDIA_TYPE: -32600,
  UNAUTHORIZED: -32001,
  FORBIDDEN: -32001,
  NOT_FOUND: -32001,
  BUSY: -32000,
};

export function jsonRpcError(code: number, message: string, data?: unknown): object {
  return { jsonrpc: '2.0', error: { code, message, ...(data !== undefined ? { data } : {}) }, id: null };
}

export function sendError(req: Request, res: Response, err: AppError): void {
  if (res.headersSent) return void res.end();
  res.status(err.httpStatus);
  if (err.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(err.retryAfterSeconds));
  if (req.path.startsWith('/mcp')) {
    res.json(jsonRpcError(JSON_RPC_CODES[err.code] ?? -32603, err.message, err.toJSON()));
  } else {
    res.json({ error: err.toJSON() });
  }
}

interface BodyParserError extends Error {
  type?: string;
  status?: number;
  /** zlib's, when the body did not decode. */
  code?: string;
  limit?: number;
  length?: number;
}

/** Body-parser failures (too large, bad JSON, bad charset) as AppErrors. */
export function fromBodyParser(e: BodyParserError, limitNote: string): AppError | undefined {
  switch (e.type ?? '') {
    case 'entity.too.large':
      return new AppError(
        'TOO_LARGE',
        `request body of ${e.length ?? '?'} bytes is over the limit of ${e.limit ?? '?'} bytes`,
        {
          violations: [
            {
              field: '(request body)',
              message: 'too large',
              ...(e.limit !== undefined ? { limit: e.limit } : {}),
            },
          ],
          hint: `send less code, files or stdin; ${limitNote}`,
        },
      );
    case 'entity.parse.failed':
      return new AppError('INVALID_REQUEST', 'request body is not valid JSON', {
        hint: 'send a JSON-RPC message as JSON',
      });
    case 'entity.verify.failed':
      // The JSON body's own check (request.ts): already an AppError.
      return e instanceof AppError ? e : undefined;
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new AppError('INVALID_REQUEST', e.message, { hint: 'send UTF-8 JSON' });
    default:
      return undecodable(e);
  }
}

/**
 * A body that is not what its Content-Encoding says: zlib's error (Z_DATA_ERROR, Z_BUF_ERROR…),
 * which body-parser passes on as a 400 without a type of its own.
 */
function undecodable(e: BodyParserError): AppError | undefined {
  if (e.status !== 400 || typeof e.code !== 'string' || !e.code.startsWith('Z_')) return undefined;
  return new AppError('INVALID_REQUEST', `the request body cannot be read: ${e.message}`, {
    violations: [{ field: '(request body)', message: 'cannot be read' }],
    hint: 'send the body as plain JSON, or compressed as its Content-Encoding says (gzip, deflate, br)',
  });
}

/** The last middleware: everything becomes JSON; unknown errors are logged and answered generically. */
export function errorHandler(logger: Logger, limitNote: string) {
  return (e: unknown, req: Request, res: Response, _next: NextFunction): void => {
    const parsed = e instanceof Error ? fromBodyParser(e, limitNote) : undefined;
    const type = (e as BodyParserError).type;
    if (parsed && req.path.startsWith('/mcp') && type === 'entity.parse.failed') {
      res.status(400).json(jsonRpcError(-32700, 'Parse error: request body is not valid JSON'));
      return;
    }
    if (parsed && req.path.startsWith('/mcp') && type === 'entity.verify.failed') {
      res.status(400).json(jsonRpcError(-32700, `Parse error: ${parsed.message}`, parsed.toJSON()));
      return;
    }
    let err = parsed ?? badPath(e) ?? toAppError(e);
    if (err.code === 'INTERNAL') {
      logger.error({ err: e, method: req.method, path: req.path }, 'request failed');
      err = new AppError('INTERNAL', 'internal error; the server log has the detail');
    }
    sendError(req, res, err);
  };
}

/** A route parameter that is not percent-encoded UTF-8 (the router's URIError, `%zz` or `%ED%A0%80`). */
export function badPath(e: unknown): AppError | undefined {
  if (!(e instanceof URIError)) return undefined;
  return new AppError('INVALID_REQUEST', `the URL path is not percent-encoded UTF-8: ${e.message}`, {
    violations: [{ field: '(path)', message: 'not percent-encoded UTF-8' }],
    hint: 'encode each byte of a name with %XX, and only bytes of UTF-8 text',
  });
}

export function notFound(req: Request, res: Response): void {
  sendError(
    req,
    res,
    new AppError('NOT_FOUND', `no route ${req.method} ${req.path}`, {
      hint: 'the endpoints are /mcp, /sessions, /runs, /health, /metrics and /openapi.json (the REST API)',
    }),
  );
}
