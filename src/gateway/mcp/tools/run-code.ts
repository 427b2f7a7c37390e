/** run_code: code in a language, in one fresh sandbox; output streamed while it runs. */
import type { ToolSpec } from '../tool-spec.js';
import { principalOf, type ToolDeps } from '../context.js';
import { runStreamed, runToolResult, startRunTask, templateOf } from '../run.js';
import { RunResultOutput, type RunToolArgs, type ToolSchemas } from '../schemas.js';

export const RUN_ANNOTATIONS = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: false,
} as const;

/** A tool that changes what is already there (a session's files): destructive, not idempotent. */
export const CHANGE_ANNOTATIONS = { ...RUN_ANNOTATIONS, destructiveHint: true } as const;

/** A tool that ends something (a run, a session): destructive, and idempotent. */
export const END_ANNOTATIONS = { ...CHANGE_ANNOTATIONS, idempotentHint: true } as const;

export function runCodeTool(schemas: ToolSchemas): ToolSpec {
  return {
    name: 'run_code',
    title: 'Run code in a sandbox',
    description:
      `Runs code in a fresh sandbox (${'network' in schemas.runCode.listed.shape ? 'no network unless network names an allowlist' : 'no network'}; CPU, memory, time capped): exit code, stdout, stderr. ` +
      'Streams output as logs.',
    input: schemas.runCode,
    output: RunResultOutput,
    annotations: RUN_ANNOTATIONS,
    handler: (deps) => async (args: RunToolArgs, extra) => {
      const result = await runStreamed(deps, codeRequest(deps, args), extra);
      return runToolResult(deps, result, principalOf(extra, deps));
    },
    task: (deps) => (args: RunToolArgs, extra) => startRunTask(deps, codeRequest(deps, args), extra),
  };
}

function codeRequest(deps: ToolDeps, args: RunToolArgs) {
  const { language: _l, template: _t, ...rest } = args;
  return { ...rest, template: templateOf(deps, args, 'python') };
}
