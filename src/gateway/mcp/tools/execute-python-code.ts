/**
 * execute_python_code(code_string): the seed servers' tool, kept for agents written against them.
 * Python 3.11 in a fresh sandbox with a 10 s default deadline (lower when the server's ceiling is).
 * The seed's result shape was not available to us; this snake_case shape is our design (docs/mcp.md).
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import * as z from 'zod';
import type { RunResult } from '../../../api/run.js';
import type { ToolDeps } from '../context.js';
import { instrument } from '../instrument.js';
import { toolResult } from '../results.js';
import { runStreamed } from '../run.js';

export const SEED_DEFAULT_TIMEOUT_SECONDS = 10;

const Input = z
  .object({ code_string: z.string().describe('Python 3 source to run; print() what you want back') })
  .strict();

export const SeedExecuteOutput = z.object({
  success: z.boolean().describe('True when the program ran to completion with exit code 0'),
  stdout: z.string().describe('Standard output (head and tail kept when long)'),
  stderr: z.string().describe('Standard error, e.g. a traceback (head and tail kept when long)'),
  exit_code: z.number().int().nullable().describe('Exit code, null when the program never finished'),
  timed_out: z.boolean().describe('True when the deadline ended the program'),
  truncated: z.boolean().describe('True when output was cut to the limit'),
  error: z.string().nullable().describe('Why the run did not succeed, null when it did'),
  run_id: z.string().describe('Run id, for get_run'),
  duration_ms: z.number().describe('Wall-clock time in milliseconds'),
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

export function registerExecutePythonCode(server: McpServer, deps: ToolDeps): void {
  server.registerTool(
    'execute_python_code',
    {
      title: 'Execute Python code',
      description:
        'Runs Python 3 code in a fresh, locked-down sandbox (no network, 10 s deadline) and returns stdout, stderr ' +
        'and the exit code. Compatible with the seed servers; run_code offers more languages and options.',
      inputSchema: Input,
      outputSchema: SeedExecuteOutput,
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    instrument('execute_python_code', deps, async ({ code_string }: z.infer<typeof Input>, extra) => {
      const timeoutSeconds = Math.min(
        SEED_DEFAULT_TIMEOUT_SECONDS,
        deps.service.policy.ceilings.timeoutSeconds,
      );
      const result = toSeedResult(
        await runStreamed(deps, { template: 'python', code: code_string, timeoutSeconds }, extra),
      );
      return toolResult(SeedExecuteOutput, result, render(result));
    }),
  );
}
