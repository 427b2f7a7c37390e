/** run_command: an explicit argv in one fresh sandbox; output streamed while it runs. */
import type { ToolSpec } from '../tool-spec.js';
import { principalOf, type ToolDeps } from '../context.js';
import { runStreamed, runToolResult, startRunTask, templateOf } from '../run.js';
import { RunResultOutput, type RunToolArgs, type ToolSchemas } from '../schemas.js';
import { RUN_ANNOTATIONS } from './run-code.js';

export function runCommandTool(schemas: ToolSchemas): ToolSpec {
  return {
    name: 'run_command',
    title: 'Run a command in a sandbox',
    description: "Runs an argv in a fresh sandbox of a template's image, like run_code.",
    input: schemas.runCommand,
    output: RunResultOutput,
    annotations: RUN_ANNOTATIONS,
    handler: (deps) => async (args: RunToolArgs, extra) => {
      const result = await runStreamed(deps, commandRequest(deps, args), extra);
      return runToolResult(deps, result, principalOf(extra, deps));
    },
    task: (deps) => (args: RunToolArgs, extra) => startRunTask(deps, commandRequest(deps, args), extra),
  };
}

function commandRequest(deps: ToolDeps, args: RunToolArgs) {
  const { language: _l, template: _t, ...rest } = args;
  // An image of the caller's choosing needs no template.
  const template = templateOf(deps, args, args.image === undefined ? 'bash' : undefined);
  return { ...rest, ...(template ? { template } : {}) };
}
