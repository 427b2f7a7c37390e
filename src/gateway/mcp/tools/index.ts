/** Every tool the gateway offers, as catalog entries. */
import type { ToolSpec } from '../tool-spec.js';
import type { ToolSchemas } from '../schemas.js';
import type { SessionSchemas } from '../session-schemas.js';
import { cancelRunTool } from './cancel-run.js';
import { checkSandboxHealthTool } from './check-sandbox-health.js';
import { executePythonCodeTool } from './execute-python-code.js';
import { getRunTool } from './get-run.js';
import { listTemplatesTool } from './list-templates.js';
import { runCodeTool } from './run-code.js';
import { runCommandTool } from './run-command.js';
import { sandboxExecTool } from './sandbox-exec.js';
import { sandboxListFilesTool, sandboxReadFileTool, sandboxWriteFileTool } from './sandbox-files.js';
import { sandboxCreateTool, sandboxDeleteTool, sandboxListTool } from './sandbox-session.js';
import { sandboxHealthTool } from './sandbox-health.js';

export const TOOL_NAMES = [
  'run_code',
  'run_command',
  'get_run',
  'cancel_run',
  'list_templates',
  'sandbox_health',
  'execute_python_code',
  'check_sandbox_health',
  'sandbox_create',
  'sandbox_exec',
  'sandbox_write_file',
  'sandbox_read_file',
  'sandbox_list_files',
  'sandbox_delete',
  'sandbox_list',
] as const;

/** The tools before sessions, whose tools/list issue 10 halved (its budget test). */
export const RUN_TOOL_NAMES = TOOL_NAMES.slice(0, 8);

/** The seed servers' tools, which `server.seedTools: false` hides. */
export const SEED_TOOL_NAMES = ['execute_python_code', 'check_sandbox_health'] as const;

export function allTools(schemas: ToolSchemas, sessions: SessionSchemas): ToolSpec[] {
  return [
    runCodeTool(schemas),
    runCommandTool(schemas),
    getRunTool(schemas),
    cancelRunTool(schemas),
    listTemplatesTool(schemas),
    sandboxHealthTool(schemas),
    executePythonCodeTool(),
    checkSandboxHealthTool(schemas),
    sandboxCreateTool(sessions),
    sandboxExecTool(sessions),
    sandboxWriteFileTool(sessions),
    sandboxReadFileTool(sessions),
    sandboxListFilesTool(sessions),
    sandboxDeleteTool(sessions),
    sandboxListTool(schemas),
  ];
}
