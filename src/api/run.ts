/**
 * The run model every backend shares (DESIGN.md §4a): what a caller may ask for, and what a run
 * reports. The CRD status, the Docker backend, MCP results and REST bodies all use these names.
 */
import * as z from 'zod';
import { CPU_FORM, parseCpu, parseSize, SIZE_FORM } from '../shared/quantity.js';
import { OutputsRequestSchema, RunOutputsSchema } from './outputs.js';
import { NetworkSchema } from './egress.js';

export const PHASES = [
  'Pending',
  'Running',
  'Succeeded',
  'Failed',
  'TimedOut',
  'Rejected',
  'Cancelled',
] as const;
export const PhaseSchema = z.enum(PHASES).describe('Lifecycle phase of the run');
export type Phase = z.infer<typeof PhaseSchema>;

export const TERMINAL_PHASES: readonly Phase[] = ['Succeeded', 'Failed', 'TimedOut', 'Rejected', 'Cancelled'];
export const isTerminal = (phase: Phase): boolean => TERMINAL_PHASES.includes(phase);

export const REASONS = [
  'Completed',
  'Error',
  'OOMKilled',
  'DeadlineExceeded',
  'PolicyDenied',
  'ImageNotFound',
  'RuntimeClassNotFound',
  'QuotaExceeded',
  'Unschedulable',
  'PendingTimeout',
  'Cancelled',
  'BackendError',
] as const;
export const ReasonSchema = z.enum(REASONS).describe('Why the run is in its phase');
export type Reason = z.infer<typeof ReasonSchema>;

/** A path inside the workspace: relative, no `..`, no empty or dot segments, printable characters. */
export function isSafeRelativePath(path: string): boolean {
  if (path.length === 0 || path.length > 255 || path.startsWith('/')) return false;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(path)) return false;
  const segments = path.split('/');
  return segments.length <= 16 && segments.every((s) => s !== '' && s !== '.' && s !== '..');
}

/** The longest argument or environment string execve(2) takes, its NUL included (Linux's MAX_ARG_STRLEN). */
export const MAX_ARG_STRING_BYTES = 128 * 1024;
/**
 * What one exec's argv and environment may hold in all, each string with its NUL: half of what
 * execve(2) allows under the usual 8 MiB stack (a quarter of it), so that a session's variables
 * and an exec's arguments fit together.
 */
export const MAX_ARGV_ENV_BYTES = 1024 * 1024;

/** Bytes of `strings` as execve(2) counts them: each with its NUL. */
export function execStringBytes(strings: readonly string[]): number {
  return strings.reduce((n, s) => n + Buffer.byteLength(s) + 1, 0);
}

export const envStrings = (env: readonly { name: string; value: string }[]): string[] =>
  env.map((e) => `${e.name}=${e.value}`);

/**
 * Text the runner hands to exec(2) as C strings: a NUL byte would end it early, and one over
 * MAX_ARG_STRLEN could never run (E2BIG), so both are refused here.
 */
export const argString = () =>
  z
    .string()
    .refine((s) => !s.includes('\u0000'), { message: 'must not contain a NUL byte' })
    .refine((s) => Buffer.byteLength(s) < MAX_ARG_STRING_BYTES, {
      message: `is over ${MAX_ARG_STRING_BYTES - 1} bytes, the longest argument exec(2) takes`,
    });

/** A refinement: argv and env together within `limit` bytes (execve(2)'s E2BIG otherwise). */
export function checkArgvEnv(
  ctx: z.RefinementCtx,
  field: string,
  strings: readonly string[],
  limit = MAX_ARGV_ENV_BYTES,
): void {
  const bytes = execStringBytes(strings);
  if (bytes > limit)
    ctx.addIssue({
      code: 'custom',
      path: [field],
      message: `arguments and environment total ${bytes} bytes, over the ${limit} an exec may have`,
    });
}

// Zero is refused: Docker reads a memory, CPU or tmpfs size of 0 as "no limit".
const quantity = (form: string, parse: (v: string | number) => number | undefined) =>
  z
    .union([z.string(), z.number()])
    .refine((v) => (parse(v) ?? 0) > 0, { message: `expected ${form}, more than zero` });

export const FileInputSchema = z
  .object({
    path: z
      .string()
      .refine(isSafeRelativePath, {
        message:
          'expected a relative path inside the workspace (no leading /, no .. or empty segments, at most 16 deep)',
      })
      .describe('Path relative to the workspace, e.g. data/input.csv'),
    content: z.string().describe('File content, as text or base64 (see encoding)'),
    encoding: z.enum(['utf8', 'base64']).default('utf8').describe('How content is encoded'),
    executable: z.boolean().default(false).describe('Make the file executable'),
  })
  .strict();
export type FileInput = z.input<typeof FileInputSchema>;

export const EnvVarSchema = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, {
        message: 'expected a name like FOO_BAR (letters, digits, _)',
      })
      .describe('Variable name'),
    value: argString().describe('Variable value'),
  })
  .strict()
  .refine((e) => Buffer.byteLength(e.name) + 1 + Buffer.byteLength(e.value) < MAX_ARG_STRING_BYTES, {
    path: ['value'],
    message: `NAME=VALUE is over ${MAX_ARG_STRING_BYTES - 1} bytes, the longest variable exec(2) takes`,
  });
export type EnvVar = z.infer<typeof EnvVarSchema>;

export const ResourcesSchema = z
  .object({
    cpu: quantity(CPU_FORM, parseCpu)
      .optional()
      .describe('CPU limit, e.g. 1 or 500m; at most the policy ceiling'),
    memory: quantity(SIZE_FORM, parseSize)
      .optional()
      .describe('Memory limit, e.g. 256m or 512Mi; swap is never allowed'),
    pids: z.number().int().positive().optional().describe('Maximum number of processes and threads'),
    ephemeralStorage: quantity(SIZE_FORM, parseSize)
      .optional()
      .describe('Size of the writable workspace, e.g. 64Mi'),
  })
  .strict();
export type Resources = z.infer<typeof ResourcesSchema>;

/** What an idempotency key may hold: 1–128 of letters, digits and `._:-`. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

export const RequestIdSchema = z
  .string()
  .regex(REQUEST_ID_PATTERN, { message: 'expected 1-128 characters of A-Z a-z 0-9 . _ : -' })
  .describe(
    'Idempotency key, scoped to the caller: a repeat with the same key returns the same run (live: its output streams) and never starts another; another request under a used key is a CONFLICT',
  );

export const RunRequestSchema = z
  .object({
    requestId: RequestIdSchema.optional(),
    template: z
      .string()
      .regex(/^[a-z][a-z0-9-]{0,31}$/, { message: 'expected a template name like python' })
      .optional()
      .describe('Named template: python, python-data, node, bash, c or rust'),
    image: z.string().min(1).max(255).optional().describe('Image override; must be in the image allowlist'),
    code: z.string().optional().describe("Source code, run by the template's runner"),
    command: z
      .array(argString())
      .min(1)
      .max(256)
      .optional()
      .describe('Explicit argv, run in the workspace instead of (or around) the code'),
    files: z.array(FileInputSchema).default([]).describe('Small input files written to the workspace'),
    stdin: z.string().optional().describe('Text fed to the program on standard input'),
    env: z.array(EnvVarSchema).default([]).describe('Environment variables for the program'),
    resources: ResourcesSchema.optional().describe('Limits below the policy ceilings'),
    timeoutSeconds: z.number().int().positive().optional().describe('Hard wall-clock deadline in seconds'),
    network: NetworkSchema.optional().describe(
      'Network access: none by default; or an allowlist of hosts and ranges within the operator’s ceiling',
    ),
    runtime: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{0,62}$/, { message: 'expected a runtime name like runsc' })
      .optional()
      .describe('Container runtime (Docker) or RuntimeClass (Kubernetes), from the allowed list'),
    outputs: OutputsRequestSchema.optional(),
  })
  .strict()
  .superRefine((req, ctx) => {
    if (req.code === undefined && req.command === undefined) {
      ctx.addIssue({ code: 'custom', path: ['code'], message: 'give code or command' });
    }
    if (req.template === undefined && req.image === undefined) {
      ctx.addIssue({ code: 'custom', path: ['template'], message: 'give a template or an image' });
    }
    if (req.template === undefined && req.code !== undefined) {
      // Only template images carry /sandpit/code; without one the code would be silently dropped.
      ctx.addIssue({
        code: 'custom',
        path: ['template'],
        message: 'code needs a template (it is exposed at /sandpit/code/main.*)',
      });
    }
    checkArgvEnv(ctx, req.command ? 'command' : 'env', [...(req.command ?? []), ...envStrings(req.env)]);
    const seen = new Set<string>();
    req.files.forEach((f, i) => {
      if (seen.has(f.path))
        ctx.addIssue({ code: 'custom', path: ['files', i, 'path'], message: 'duplicate path' });
      seen.add(f.path);
    });
    // A file cannot also be a directory that another file is in.
    req.files.forEach((f, i) => {
      const segments = f.path.split('/');
      for (let n = 1; n < segments.length; n++) {
        const dir = segments.slice(0, n).join('/');
        if (seen.has(dir)) {
          ctx.addIssue({
            code: 'custom',
            path: ['files', i, 'path'],
            message: `"${dir}" is a file, so it cannot also be a directory`,
          });
          break;
        }
      }
    });
  });
export type RunRequest = z.infer<typeof RunRequestSchema>;
export type RunRequestInput = z.input<typeof RunRequestSchema>;

export const EffectiveLimitsSchema = z.object({
  cpu: z.string().describe('CPU limit (Kubernetes quantity)'),
  memoryBytes: z.number().int().describe('Memory limit in bytes'),
  pids: z.number().int().describe('Process limit'),
  workspaceBytes: z.number().int().describe('Workspace size in bytes'),
  tmpBytes: z.number().int().describe('/tmp size in bytes'),
  timeoutSeconds: z.number().int().describe('Wall-clock deadline in seconds'),
  outputBytes: z.number().int().describe('Bytes of each output stream kept (head + tail)'),
});
export type EffectiveLimitsView = z.infer<typeof EffectiveLimitsSchema>;

/** The limits a run gets after policy (what every backend renders). */
export interface EffectiveLimits {
  cpuMilli: number;
  memoryBytes: number;
  pids: number;
  workspaceBytes: number;
  tmpBytes: number;
  timeoutSeconds: number;
  outputBytes: number;
  /** Largest file any process may write (ulimit fsize). */
  fileSizeBytes: number;
  openFiles: number;
}

export const RunResultSchema = z.object({
  runId: z.string().describe('Identifier of the run; get_run and cancel_run take it'),
  phase: PhaseSchema,
  reason: ReasonSchema.optional(),
  message: z.string().optional().describe('Human-readable detail about the outcome'),
  hint: z.string().optional().describe('What to do about the outcome, when it is known'),
  exitCode: z.number().int().nullable().describe('Exit code of the program, null if it never ran'),
  timedOut: z.boolean().describe('True exactly when the deadline ended the run'),
  stdout: z.string().describe('Standard output; head and tail kept when truncated'),
  stderr: z.string().describe('Standard error; head and tail kept when truncated'),
  truncated: z.boolean().describe('True when any output was cut to the limit'),
  stdoutBytes: z.number().int().describe('Total bytes the program wrote to stdout'),
  stderrBytes: z.number().int().describe('Total bytes the program wrote to stderr'),
  binaryOutput: z.boolean().describe('True when output was binary and is summarised instead of shown'),
  durationMs: z.number().describe('Wall-clock time of the run in milliseconds'),
  template: z.string().optional(),
  image: z.string().optional(),
  runtime: z.string().optional(),
  backend: z.string().optional().describe('The backend: docker, oci or kubernetes'),
  served: z.enum(['cold', 'warm']).optional().describe('Whether a warm pool container served the run'),
  limits: EffectiveLimitsSchema.optional(),
  outputs: RunOutputsSchema.optional().describe(
    'Files the run returned (outputs), and every entry or file not collected, with why',
  ),
  createdAt: z.string().optional(),
  finishedAt: z.string().optional(),
});
export type RunResult = z.infer<typeof RunResultSchema>;
