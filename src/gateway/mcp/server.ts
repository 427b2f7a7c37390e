/** One MCP server with every tool. A server serves one transport: stdio, one HTTP session, or one stateless request. */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SetLevelRequestSchema, type LoggingLevel } from '@modelcontextprotocol/sdk/types.js';
import { buildCatalog, registerCatalog, type CatalogOptions, type ToolCatalog } from './catalog.js';
import type { ToolDeps } from './context.js';
import { registerRunResources } from './run-resources.js';
import { registerSessionResources } from './session-resources.js';
import { PrincipalTaskStore, TaskIndex, type TaskBinding } from './tasks.js';
import { allTools } from './tools/index.js';

const INSTRUCTIONS =
  'Runs untrusted code in locked-down, network-less containers. Use run_code for a snippet in a language ' +
  '(list_templates shows them and their limits), run_command for an argv. Output streams as log notifications ' +
  '(logger stdout/stderr) while a run executes; the final result carries exit code and capped output, and ' +
  'the files named in outputs (images inline, others as resource links). ' +
  'For work across calls, sandbox_create a session, then sandbox_exec and the file tools in it; sandbox_delete it when done.';

/** The tools a gateway offers under its policy: built once, shared by every server it creates. */
export function buildToolCatalog(deps: Pick<ToolDeps, 'service'>, options: CatalogOptions = {}): ToolCatalog {
  return buildCatalog(deps.service.policy, allTools, options);
}

/**
 * `binding`: whose the server's tasks are (its session's, or its request's, principal) and the
 * process's index of them; stdio has one server, so one of each.
 */
export function createMcpServer(
  deps: ToolDeps,
  catalog: ToolCatalog = buildToolCatalog(deps),
  binding: TaskBinding = { principal: deps.defaultPrincipal, index: new TaskIndex() },
): McpServer {
  const tasks = new PrincipalTaskStore(deps, binding);
  const server = new McpServer(
    { name: 'sandpit', version: deps.version },
    {
      capabilities: {
        logging: {},
        tools: { listChanged: true },
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
      // The SDK answers tasks/get, tasks/result, tasks/list and tasks/cancel from it.
      taskStore: tasks,
      instructions: INSTRUCTIONS,
    },
  );
  // Output notifications honour logging/setLevel; the SDK keeps the level to itself, so keep our own.
  let level: LoggingLevel | undefined;
  server.server.setRequestHandler(SetLevelRequestSchema, (request) => {
    level = request.params.level;
    return {};
  });
  const withLevel = { ...deps, clientLogLevel: () => level };
  registerCatalog(server, catalog, withLevel, tasks);
  registerSessionResources(server, withLevel);
  registerRunResources(server, withLevel);
  return server;
}
