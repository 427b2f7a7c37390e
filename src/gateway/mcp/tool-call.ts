/**
 * tools/call, answered from the catalog. A plain call runs the tool's handler, which streams output
 * on the call's own response, as it always has. A call that asks for a task (`params.task`, MCP
 * 2025-11-25) of a tool that offers one starts the work bound to no request and answers at once
 * with the task; its status, result and cancel are tasks/* (tasks.ts). The SDK's registerToolTask
 * is not used: with taskSupport optional it would answer plain calls by polling its task store,
 * with no output streamed.
 */
import {
  ErrorCode,
  McpError,
  type CallToolRequest,
  type CallToolResult,
  type CreateTaskResult,
} from '@modelcontextprotocol/sdk/types.js';
import { parseInput } from '../../api/validate.js';
import { AppError } from '../../shared/errors.js';
import type { ToolDeps, ToolExtra } from './context.js';
import { instrument, instrumentWith, type ToolHandler } from './instrument.js';
import { taskRefused, toolError } from './results.js';
import type { PrincipalTaskStore } from './tasks.js';
import type { ToolSpec } from './tool-spec.js';

interface BoundTool {
  call: ToolHandler<unknown>;
  task: ToolHandler<unknown, string> | undefined;
}

export function toolCallHandler(
  specs: readonly ToolSpec[],
  deps: ToolDeps,
  tasks: PrincipalTaskStore,
): (request: CallToolRequest, extra: ToolExtra) => Promise<CallToolResult | CreateTaskResult> {
  const tools = new Map<string, BoundTool>();
  for (const spec of specs) {
    // Arguments are parsed inside the instrumented call: a bad one is the tool's INVALID_REQUEST.
    const parsed =
      <R>(handler: (args: never, extra: ToolExtra) => Promise<R>) =>
      (input: unknown, extra: ToolExtra): Promise<R> =>
        handler(parseInput(spec.input.parse, input ?? {}, `${spec.name} arguments`) as never, extra);
    tools.set(spec.name, {
      call: instrument(spec.name, deps, parsed(spec.handler(deps))),
      task: spec.task && instrumentWith(spec.name, deps, parsed(spec.task(deps)), taskRefused),
    });
  }
  return async (request, extra) => {
    const { name, arguments: input, task } = request.params;
    const tool = tools.get(name);
    // A tool result, as the SDK's own tools/call gave it: clients show it to the model.
    if (!tool)
      return toolError(
        new AppError('NOT_FOUND', `tool ${name} not found`, { hint: 'tools/list names them' }),
      );
    if (!task) return tool.call(input, extra);
    if (!tool.task) throw new McpError(ErrorCode.MethodNotFound, `Tool ${name} does not run as a task`);
    return { task: await tasks.created(await tool.task(input, extra)) };
  };
}
