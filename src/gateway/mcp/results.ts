/**
 * Tool results: structured content with a readable text part, and the one mapping from AppError to
 * an `isError` result that names the violated fields and limits and says how to recover.
 */
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type * as z from 'zod';
import { toAppError, type AppError } from '../../shared/errors.js';

/**
 * Structured content is parsed with the tool's output schema first: fields the schema does not
 * declare are dropped (clients validate with additionalProperties: false), and a value that does
 * not fit fails here, on the server, not in every client.
 */
export function toolResult<S extends z.ZodObject>(
  schema: S,
  value: z.input<S>,
  text: string,
): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: schema.parse(value) };
}

export function toolError(err: AppError): CallToolResult {
  return {
    content: [{ type: 'text', text: errorText(err) }],
    isError: true,
    _meta: { 'sandpit.dev/error': err.toJSON() },
  };
}

/**
 * A task that could not be created: a CreateTaskResult cannot carry isError, so the same text is
 * a JSON-RPC error, with the AppError as its data; the caller's fault is -32602, anything else -32603.
 */
export function taskRefused(err: AppError): never {
  const code = err.httpStatus < 500 && !err.retryable ? ErrorCode.InvalidParams : ErrorCode.InternalError;
  throw new McpError(code, errorText(err), err.toJSON());
}

/** MCP's code for a resource that does not exist (or is another principal's). */
export const RESOURCE_NOT_FOUND = -32002;

/**
 * A refusal of a protocol request that is not a tool call (resources/read, resources/subscribe)
 * as a JSON-RPC error: NOT_FOUND is MCP's -32002, the caller's fault -32602, anything else -32603,
 * with the AppError as its data. (Thrown as it is, an AppError's string code made every one -32603.)
 */
export function protocolError(err: AppError): McpError {
  const code =
    err.code === 'NOT_FOUND'
      ? RESOURCE_NOT_FOUND
      : err.httpStatus < 500 && !err.retryable
        ? ErrorCode.InvalidParams
        : ErrorCode.InternalError;
  return new McpError(code, errorText(err), err.toJSON());
}

/** A protocol request handler whose refusals go out as protocolError() says. */
export function asProtocolErrors<A extends unknown[], R>(
  handler: (...args: A) => Promise<R>,
): (...args: A) => Promise<R> {
  return async (...args) => {
    try {
      return await handler(...args);
    } catch (e) {
      if (e instanceof McpError) throw e;
      throw protocolError(toAppError(e));
    }
  };
}

function errorText(err: AppError): string {
  const lines = [`${err.code}: ${err.message}`];
  for (const v of err.violations) {
    const limit = v.limit !== undefined ? ` (limit: ${v.limit})` : '';
    lines.push(`  - ${v.field}: ${v.message}${limit}`);
  }
  lines.push(`hint: ${err.hint ?? (err.retryable ? 'retry later' : 'this request cannot succeed as sent')}`);
  if (err.retryAfterSeconds !== undefined) lines.push(`retry after: ${err.retryAfterSeconds} s`);
  else if (err.retryable) lines.push('retryable: yes');
  return lines.join('\n');
}
