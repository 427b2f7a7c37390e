/**
 * execute_python_code(code_string): the seed servers' tool, kept for agents written against them.
 * Python 3.11 in a fresh sandbox with a 10 s default deadline (lower when the server's ceiling is).
 * The seed's result shape was not available to us; this snake_case shape is our design (docs/mcp.md).
 */
import * as z from 'zod';
import type { RunResult } from '../../../api/run.js';
import type { ToolSpec } from '../tool-spec.js';
import { toolResult } from '../results.js';
import { runStreamed } from '../run.js';
import { RUN_ANNOTATIONS } from './run-code.js';

export const SEED_DEFAULT_TIMEOUT_SECONDS = 10;

const Input = z
  .object({ code_string: z.string().describe('Python 3 source; print() what you want back') })
  .strict();

export const SeedExecuteOutput = z.object({
  success: z.boolean().describe('Exit code 0'),
  stdout: z.string().describe('Head and tail when long'),
  stderr: z.string().describe('E.g. a traceback'),
  exit_code: z.number().int().nullable().describe('Null if it never exited'),
  timed_out: z.boolean().describe('The deadline ended it'),
  truncated: z.boolean().describe('Output was cut'),
  error: z.string().nullable().describe('Why it failed, null if it did not'),
  run_id: z.string().describe('For get_run'),
  duration_ms: z.number().describe('Wall-clock ms'),
});
type SeedExecute = z.infer<typeof SeedExecuteOutput>;

export function toSeedResult(r: RunResult): SeedExecute {
  const success = r.phase === 'Succeeded';
  return {
    success,
    stdout: r.stdout,
    stderr: r.stderr,
    exit_code: r.exitCode,
    timed_out: r.timedOut,
    truncated: r.truncated,
    error: success
      ? null
      : [r.message ?? r.reason ?? r.phase, r.hint].filter((p) => p !== undefined).join('; '),
    run_id: r.runId,
    duration_ms: r.durationMs,
  };
}

function render(s: SeedExecute): string {
  const parts = [s.stdout === '' && s.success ? '(no output)' : s.stdout];
  if (s.stderr !== '') parts.push(`stderr:\n${s.stderr}`);
  if (!s.success) parts.push(`error: ${s.error ?? 'unknown'}`);
  return parts.filter((p) => p !== '').join('\n');
}

export function executePythonCodeTool(): ToolSpec {
  return {
    name: 'execute_python_code',
    title: 'Execute Python code',
    description:
      'Seed-compatible: runs Python 3 in a fresh sandbox (no network, 10 s deadline); run_code offers more.',
    input: { listed: Input, parse: Input },
    output: SeedExecuteOutput,
    annotations: RUN_ANNOTATIONS,
    seed: true,
    handler: (deps) => async (args: z.infer<typeof Input>, extra) => {
      const timeoutSeconds = Math.min(
        SEED_DEFAULT_TIMEOUT_SECONDS,
        deps.service.policy.ceilings.timeoutSeconds,
      );
      const result = toSeedResult(
        await runStreamed(deps, { template: 'python', code: args.code_string, timeoutSeconds }, extra),
      );
      return toolResult(SeedExecuteOutput, result, render(result));
    },
  };
}
