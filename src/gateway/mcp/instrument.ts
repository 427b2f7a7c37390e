/**
 * Wraps a tool handler: AppErrors become `isError` results (mapped once, in results.ts), unknown
 * errors a generic message with the detail in the log; every call is counted and logged by size,
 * never by content.
 */
import { randomBytes } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { AppError, toAppError } from '../../shared/errors.js';
import { principalOf, type ToolDeps, type ToolExtra } from './context.js';
import { toolError } from './results.js';

export type ToolHandler<A, R = CallToolResult> = (args: A, extra: ToolExtra) => Promise<R>;

export function instrument<A>(tool: string, deps: ToolDeps, handler: ToolHandler<A>): ToolHandler<A> {
  return instrumentWith(tool, deps, handler, toolError);
}

/** The same, with `fail` to answer a refusal (a task's creation throws it as a JSON-RPC error). */
export function instrumentWith<A, R>(
  tool: string,
  deps: ToolDeps,
  handler: ToolHandler<A, R>,
  fail: (err: AppError) => R,
): ToolHandler<A, R> {
  return async (args, extra) => {
    const started = performance.now();
    let outcome = 'ok';
    try {
      return await handler(args, extra);
    } catch (e) {
      let err = toAppError(e);
      if (err.code === 'INTERNAL') {
        const ref = randomBytes(4).toString('hex');
        deps.logger.error({ tool, ref, err: e }, 'tool failed unexpectedly');
        err = new AppError('INTERNAL', `internal error (ref ${ref}); the server log has the detail`);
      }
      outcome = err.code.toLowerCase();
      return fail(err);
    } finally {
      deps.metrics.toolCalls.inc({ tool, outcome });
      deps.logger.info(
        {
          tool,
          principal: principalOf(extra, deps).name,
          outcome,
          durationMs: Math.round(performance.now() - started),
          argBytes: jsonBytes(args ?? {}),
        },
        'tool call',
      );
    }
  };
}

/** The size of `value` as JSON; undefined for one that cannot be written (too deep: the caller's refusal must still go out). */
function jsonBytes(value: unknown): number | undefined {
  try {
    return Buffer.byteLength(JSON.stringify(value));
  } catch {
    return undefined;
  }
}
