/** Every tool the gateway offers, registered on one server. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ToolDeps } from '../context.js';
import { registerCancelRun } from './cancel-run.js';
import { registerCheckSandboxHealth } from './check-sandbox-health.js';
import { registerExecutePythonCode } from './execute-python-code.js';
import { registerGetRun } from './get-run.js';
import { registerListTemplates } from './list-templates.js';
import { registerRunCode } from './run-code.js';
import { registerRunCommand } from './run-command.js';
import { registerSandboxHealth } from './sandbox-health.js';

export const TOOL_NAMES = [
  'run_code',
  'run_command',
  'get_run',
  'cancel_run',
  'list_templates',
  'sandbox_health',
  'execute_python_code',
  'check_sandbox_health',
] as const;

export function registerTools(server: McpServer, deps: ToolDeps): void {
  registerRunCode(server, deps);
  registerRunCommand(server, deps);
  registerGetRun(server, deps);
  registerCancelRun(server, deps);
  registerListTemplates(server, deps);
  registerSandboxHealth(server, deps);
  registerExecutePythonCode(server, deps);
  registerCheckSandboxHealth(server, deps);
}
