/**
 * Tool input and output schemas, derived from the run model in src/api (the single source of truth)
 * so that MCP, REST and the CRD cannot drift. Every field carries a description: it is the model's
 * only documentation.
 */
import * as z from 'zod';
import { RunRequestSchema, RunResultSchema } from '../../api/run.js';

const R = RunRequestSchema.shape;
const runId = z
  .string()
  .min(1)
  .max(64)
  .describe('The runId from a run_code / run_command result or its first notification');

/** Fields every run tool shares: inputs, environment and limits (all within the server's policy). */
const common = {
  files: R.files,
  stdin: R.stdin,
  env: R.env,
  timeoutSeconds: R.timeoutSeconds.describe(
    'Hard wall-clock deadline in seconds; defaults to and may not exceed the server ceiling (see list_templates)',
  ),
  resources: R.resources,
  image: R.image,
  runtime: R.runtime,
};

export const RunCodeInput = z
  .object({
    language: R.template.describe(
      'Language (template) to run the code with: python, node, bash, c or rust; default python',
    ),
    template: R.template.describe('Same as language (either may be given)'),
    code: z
      .string()
      .describe('Source code; it runs as the main file of the chosen language. Print what you want back'),
    ...common,
  })
  .strict();

export const RunCommandInput = z
  .object({
    command: R.command
      .unwrap()
      .describe('argv to execute in the workspace, e.g. ["ls", "-la"]; no shell unless you run one'),
    template: R.template.describe(
      'Template whose image runs the command: python, node, bash, c or rust; default bash',
    ),
    ...common,
  })
  .strict();

export const RunIdInput = z.object({ runId }).strict();
export const NoInput = z.object({}).strict();

export const RunResultOutput = RunResultSchema.extend({
  template: RunResultSchema.shape.template.describe('Template that ran the code'),
  image: RunResultSchema.shape.image.describe('Image the sandbox ran'),
  runtime: RunResultSchema.shape.runtime.describe('Container runtime used, when not the engine default'),
  limits: RunResultSchema.shape.limits.describe('Limits the run had after policy'),
  createdAt: RunResultSchema.shape.createdAt.describe('When the run was admitted (ISO 8601)'),
  finishedAt: RunResultSchema.shape.finishedAt.describe('When the run ended (ISO 8601)'),
});

export const TemplateInfoSchema = z.object({
  name: z.string().describe('Template name, for run_code language or run_command template'),
  description: z.string().describe('What the template runs'),
  image: z.string().describe('Image the template runs in'),
  libraries: z.array(z.string()).describe('What the image offers beyond the language runtime'),
  aliases: z.array(z.string()).describe('Other accepted names'),
  fileName: z.string().describe('Name the code is given inside the sandbox'),
  defaults: z
    .object({
      cpu: z.string().describe('CPU limit (the default and ceiling)'),
      memory: z.string().describe('Memory limit'),
      timeoutSeconds: z.number().int().describe('Default deadline in seconds'),
      pids: z.number().int().describe('Process limit'),
    })
    .describe('Limits a run gets unless it asks for less'),
});
export const ListTemplatesOutput = z.object({
  templates: z.array(TemplateInfoSchema).describe('Templates this caller may use'),
});

export const HealthOutput = z.object({
  ok: z.boolean().describe('True when runs can start: engine up and every sandbox image present'),
  backend: z.string().describe('docker or kubernetes'),
  detail: z.string().describe('What is wrong and how to fix it, or what is up'),
  images: z
    .object({
      present: z.array(z.string()).describe('Sandbox images found'),
      missing: z
        .array(z.string())
        .describe('Sandbox images missing (build them with `sandpit images build`)'),
    })
    .optional()
    .describe('Sandbox images, when the engine answered'),
  runtimes: z.array(z.string()).optional().describe('Container runtimes the engine offers'),
  pools: z
    .array(
      z.object({
        template: z.string().describe('Template (shape) the pool serves'),
        idle: z.number().int().describe('Started sandboxes waiting for a run'),
        starting: z.number().int().describe('Sandboxes being started'),
      }),
    )
    .optional()
    .describe('Warm pools, when the backend keeps them'),
  running: z.number().int().describe('Runs executing now'),
  queued: z.number().int().describe('Runs waiting for a free slot'),
});
