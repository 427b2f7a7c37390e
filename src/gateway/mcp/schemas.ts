/**
 * Tool input and output schemas, derived from the run model in src/api (the single source of truth)
 * so that MCP, REST and the CRD cannot drift, and built per server from its policy: the language is
 * an enum of the configured templates, a deadline is bounded by the ceiling. Every field carries a
 * description, as short as its meaning allows: the descriptions are the model's only documentation,
 * and every byte of tools/list is in every conversation.
 *
 * Each input has two forms: `listed` is what tools/list shows; `parse` is what a call may send. The
 * parse form also accepts quietly what the listed one leaves out: `template` for `language`, a
 * language alias (`py`), a number for a quantity.
 */
import * as z from 'zod';
import { entryText } from '../../api/egress.js';
import { RunRequestSchema, RunResultSchema } from '../../api/run.js';
import type { Policy } from '../../policy/policy.js';

const R = RunRequestSchema.shape;

export interface ToolInput<L extends z.ZodObject = z.ZodObject> {
  listed: L;
  parse: z.ZodType;
}

const runId = z.string().min(1).max(64).describe('runId from run_code or run_command');

/** A Kubernetes-style quantity, as a string in the schema (a number is accepted too). */
const quantity = (description: string) => z.string().describe(description);
const quantityParse = z.union([z.string().min(1).max(32), z.number()]);

function commonListed(policy: Policy) {
  const c = policy.ceilings;
  return {
    files: z
      .array(
        z
          .object({
            path: z.string().describe('Relative, e.g. data/in.csv'),
            content: z.string().describe('Text or base64'),
            encoding: z.enum(['utf8', 'base64']).optional().describe('Of content; utf8'),
            executable: z.boolean().optional().describe('chmod +x'),
          })
          .strict(),
      )
      .optional()
      .describe('Workspace files'),
    stdin: R.stdin.describe('Standard input'),
    env: z
      .array(z.object({ name: z.string().describe('Name'), value: z.string().describe('Value') }).strict())
      .optional()
      .describe('Env vars'),
    timeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(c.timeoutSeconds)
      .optional()
      .describe(`Seconds (default, max ${c.timeoutSeconds})`),
    resources: z
      .object({
        cpu: quantity('e.g. "0.5" or "500m"').optional(),
        memory: quantity('e.g. "256Mi"').optional(),
        pids: z.number().int().min(1).max(c.pids).optional().describe('Processes'),
        ephemeralStorage: quantity('Workspace, e.g. "64Mi"').optional(),
      })
      .strict()
      .optional()
      .describe('Below the ceilings'),
    image: z.string().optional().describe('Allowlisted image'),
    outputs: z.array(z.string()).optional().describe('Files to return (globs)'),
    requestId: z.string().optional().describe('Idempotency key'),
    ...networkListed(policy),
  };
}

/** Ceiling entries a tool's description names; the rest is summed up. */
const CEILING_SHOWN = 10;

/**
 * `network`, listed only where egress is on (DISABLE_NETWORK false and a ceiling): with it off, a
 * call that sends one anyway is refused by the policy, naming the setting.
 */
export function networkListed(policy: Policy) {
  const { disabled, ceiling } = policy.egress;
  if (disabled || ceiling.length === 0) return {};
  const shown = ceiling.slice(0, CEILING_SHOWN).map(entryText).join(', ');
  const more = ceiling.length > CEILING_SHOWN ? `, and ${ceiling.length - CEILING_SHOWN} more` : '';
  return {
    network: z
      .object({
        egress: z.enum(['none', 'allowlist']).describe('allowlist: only what allow names, through a proxy'),
        allow: z
          .array(z.string())
          .optional()
          .describe(`host[:port] or cidr[:port], within: ${shown}${more}; all of these when absent`),
      })
      .strict()
      .optional()
      .describe('Outbound network; none by default'),
  };
}

/**
 * What a call may send beyond the listed schema: numbers for quantities, `template`, aliases, a
 * network (refused while egress is off), and `runtime` (an operator's choice far more than a
 * model's; docs/mcp.md).
 */
const commonParse = {
  // The run model checks files, env and the ceilings, with errors that name the field and limit.
  files: R.files,
  env: R.env,
  timeoutSeconds: R.timeoutSeconds,
  resources: z
    .object({
      cpu: quantityParse.optional(),
      memory: quantityParse.optional(),
      pids: z.number().int().optional(),
      ephemeralStorage: quantityParse.optional(),
    })
    .strict()
    .optional(),
  image: R.image,
  outputs: R.outputs,
  runtime: R.runtime,
  network: R.network,
  requestId: R.requestId,
  language: z.string().optional(),
  template: z.string().optional(),
};

export function buildToolSchemas(policy: Policy) {
  const names = policy.templates.map((t) => t.name);
  if (names.length === 0) throw new Error('the policy has no templates');
  const language = (description: string) =>
    z
      .enum(names as [string, ...string[]])
      .optional()
      .describe(description);

  const runCodeListed = z
    .object({
      code: z.string().describe('Source, run as the main file; print what you want back'),
      language: language('Default python (list_templates)'),
      ...commonListed(policy),
    })
    .strict();
  const runCommandListed = z
    .object({
      command: R.command.unwrap().describe('argv, e.g. ["sh", "-c", "ls | wc -l"]'),
      language: language('Whose image runs it; default bash'),
      ...commonListed(policy),
    })
    .strict();
  const runCode: ToolInput<typeof runCodeListed> = {
    listed: runCodeListed,
    parse: runCodeListed.extend(commonParse),
  };
  const runCommand: ToolInput<typeof runCommandListed> = {
    listed: runCommandListed,
    parse: runCommandListed.extend(commonParse),
  };
  const byRunId = z.object({ runId }).strict();
  const none = z.object({}).strict();
  return {
    runCode,
    runCommand,
    runId: { listed: byRunId, parse: byRunId } satisfies ToolInput,
    none: { listed: none, parse: none } satisfies ToolInput,
  };
}
export type ToolSchemas = ReturnType<typeof buildToolSchemas>;

/** The parsed input of run_code and run_command (the parse form). */
export interface RunToolArgs {
  language?: string | undefined;
  template?: string | undefined;
  [field: string]: unknown;
}

const S = RunResultSchema.shape;
/**
 * The run result as tools declare it: the fields a model acts on, described. The others
 * (stdoutBytes, stderrBytes, binaryOutput, template, image, runtime, backend, served, limits,
 * createdAt, finishedAt; docs/mcp.md) pass through undeclared, since every declared field is in
 * every tools/list, four times.
 */
export const RunResultOutput = z.looseObject({
  runId: S.runId.describe('For get_run, cancel_run'),
  phase: z.string().describe('Succeeded, Failed, TimedOut, Cancelled, …'),
  reason: z.string().optional().describe('Completed, Error, OOMKilled, DeadlineExceeded, …'),
  message: S.message.describe('Detail'),
  hint: S.hint.describe('Next step'),
  exitCode: S.exitCode.describe('Null: never exited'),
  timedOut: S.timedOut.describe('The deadline ended it'),
  stdout: S.stdout.describe('Head+tail if cut'),
  stderr: S.stderr.describe('Head+tail if cut'),
  truncated: S.truncated.describe('Output was cut'),
  durationMs: S.durationMs.describe('Wall-clock ms'),
});

/** A template as list_templates declares it (aliases and fileName pass through undeclared). */
export const TemplateInfoSchema = z.looseObject({
  name: z.string().describe('For language'),
  description: z.string().describe('What it runs'),
  image: z.string().describe('Image'),
  libraries: z.array(z.string()).describe('What the image has'),
  defaults: z.looseObject({}).describe('Default and maximum limits: cpu, memory, timeoutSeconds, pids'),
});
export const ListTemplatesOutput = z.object({
  templates: z.array(TemplateInfoSchema).describe('Templates this caller may use'),
});

export const HealthOutput = z.object({
  ok: z.boolean().describe('Runs can start'),
  backend: z.string().describe('docker, oci, kubernetes'),
  detail: z.string().describe('What is wrong and the fix, or what is up'),
  images: z
    .object({
      present: z.array(z.string()).describe('Found'),
      missing: z.array(z.string()).describe('To build'),
    })
    .optional()
    .describe('Sandbox images'),
  runtimes: z.array(z.string()).optional().describe('Runtimes the engine offers'),
  pools: z.array(z.looseObject({})).optional().describe('Warm pools: template, idle, starting'),
  running: z.number().int().describe('Runs executing'),
  queued: z.number().int().describe('Runs waiting'),
});
