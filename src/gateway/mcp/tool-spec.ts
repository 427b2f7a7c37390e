/** A tool as data: its name, schemas, annotations and handler, as the catalog lists it and tools/call runs it. */
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type * as z from 'zod';
import type { ToolDeps, ToolExtra } from './context.js';
import type { ToolInput } from './schemas.js';

export interface ToolSpec {
  name: string;
  title: string;
  description: string;
  input: ToolInput;
  output: z.ZodObject;
  annotations: Required<
    Pick<ToolAnnotations, 'readOnlyHint' | 'destructiveHint' | 'idempotentHint' | 'openWorldHint'>
  >;
  /** Seed-compatible tools can be hidden (`server.seedTools: false`). */
  seed?: boolean;
  handler: (deps: ToolDeps) => (args: never, extra: ToolExtra) => Promise<CallToolResult>;
  /**
   * Where a client may also run the tool as an MCP task (tools/list: taskSupport optional): starts
   * the work, bound to no request, and answers its task id (tasks.ts).
   */
  task?: (deps: ToolDeps) => (args: never, extra: ToolExtra) => Promise<string>;
}
