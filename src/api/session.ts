/**
 * The session model (DESIGN.md §5): a sandbox that lives across commands, with files. One set of
 * schemas for the REST bodies, the MCP tools, the audit records and (on Kubernetes) the Sandbox
 * resource. A session is created from a template or an image, with limits, like a run; its
 * commands are execs, each with its own deadline, reported with the run result's field names.
 */
import * as z from 'zod';
import {
  argString,
  checkArgvEnv,
  envStrings,
  MAX_ARGV_ENV_BYTES,
  EnvVarSchema,
  type EnvVar,
  ResourcesSchema,
  RunRequestSchema,
  RunResultSchema,
  EffectiveLimitsSchema,
} from './run.js';
import { EGRESS_MODES, EgressEntryObjectSchema } from './egress.js';

export const SESSION_STATES = ['Creating', 'Ready', 'Expired', 'Deleted', 'Failed'] as const;
export const SessionStateSchema = z.enum(SESSION_STATES).describe('Lifecycle state of the session');
export type SessionState = z.infer<typeof SessionStateSchema>;

/** Why a session is in its state (what ended it, once it has ended). */
export const SESSION_REASONS = [
  'Created',
  'Deleted',
  'TTLExpired',
  'IdleExpired',
  'ContainerFailed',
  'OOMKilled',
  'ProtocolError',
  // Docker: the engine stopped or restarted (live-restore off takes its containers along). On
  // Kubernetes a kubelet or containerd restart leaves pods running, so no session ends so there.
  'EngineRestarted',
  'RunnerGone',
  'ImageNotFound',
  'PolicyDenied',
  'PendingTimeout',
  'Unschedulable',
  'BackendError',
] as const;
export const SessionReasonSchema = z.enum(SESSION_REASONS).describe('Why the session is in its state');
export type SessionReason = z.infer<typeof SessionReasonSchema>;

/** What a session id may be: a container and file name (the gateway makes `ses-<hex>`). */
export const SESSION_ID_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;

export const isSessionEnded = (state: SessionState): boolean =>
  state === 'Expired' || state === 'Deleted' || state === 'Failed';

const R = RunRequestSchema.shape;

const seconds = (what: string, max: number) => z.number().int().positive().max(max).optional().describe(what);

export const SessionRequestSchema = z
  .object({
    template: R.template,
    image: R.image,
    resources: ResourcesSchema.optional().describe('Limits below the policy ceilings'),
    network: R.network,
    runtime: R.runtime,
    ttlSeconds: seconds('Whole lifetime of the session in seconds; at most the ceiling', 31_536_000),
    idleTimeoutSeconds: seconds(
      'The session ends after this many seconds without an exec or file operation',
      31_536_000,
    ),
    timeoutSeconds: seconds('Default deadline of each exec in seconds (the seed calls it "timeout")', 86_400),
    env: z.array(EnvVarSchema).default([]).describe('Environment variables of every exec'),
    secrets: z
      .array(EnvVarSchema)
      .default([])
      .describe('Environment variables whose values are never shown, logged or audited'),
  })
  .strict()
  .superRefine((req, ctx) => {
    if (req.template === undefined && req.image === undefined) {
      ctx.addIssue({ code: 'custom', path: ['template'], message: 'give a template or an image' });
    }
    // Every exec's environment holds these: half of what an exec may have, the rest its own.
    checkArgvEnv(ctx, 'env', envStrings([...req.env, ...req.secrets]), MAX_ARGV_ENV_BYTES / 2);
    const seen = new Set<string>();
    [...req.env, ...req.secrets].forEach((e, i) => {
      if (seen.has(e.name))
        ctx.addIssue({
          code: 'custom',
          path: [i < req.env.length ? 'env' : 'secrets'],
          message: `${e.name} is given twice`,
        });
      seen.add(e.name);
    });
  });
export type SessionRequest = z.infer<typeof SessionRequestSchema>;
export type SessionRequestInput = z.input<typeof SessionRequestSchema>;

/** The seed's body: `{"image": "python:3.11", "timeout": 30}`; `timeout` is the exec default. */
export function fromSeedSessionBody(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const { timeout, ...rest } = body as Record<string, unknown>;
  return timeout === undefined || 'timeoutSeconds' in rest ? body : { ...rest, timeoutSeconds: timeout };
}

export const WORKSPACE_ROOT = '/workspace';

/**
 * A caller's path inside the workspace as the runner takes it: relative, `''` for the workspace
 * itself. Absolute paths are accepted under /workspace only. Undefined for anything that could
 * leave it or that no file system holds: `..`, NUL, a name over 255 bytes, a path over 4096.
 * (Symlinks are the runner's to refuse: it resolves one component at a time.)
 */
export function toWorkspacePath(input: string): string | undefined {
  if (Buffer.byteLength(input) > 4096 || input.includes('\0')) return undefined;
  let p = input;
  if (p === WORKSPACE_ROOT || p.startsWith(`${WORKSPACE_ROOT}/`)) p = p.slice(WORKSPACE_ROOT.length);
  else if (p.startsWith('/')) return undefined;
  const parts = p.split('/').filter((s) => s !== '' && s !== '.');
  if (parts.some((s) => s === '..' || Buffer.byteLength(s) > 255)) return undefined;
  return parts.join('/');
}

/** What a workspace path may be: the message of every refusal of one. */
export const PATH_RULE =
  'expected a path inside the workspace: relative (or under /workspace), no .., no NUL, names up to 255 bytes, 4096 in all';

/** A path inside the session's workspace, as a caller gives it (relative, or under /workspace). */
export const SessionPathSchema = z
  .string()
  .min(1)
  .refine((p) => toWorkspacePath(p) !== undefined, { message: PATH_RULE })
  .describe('Path in the workspace, e.g. data/input.csv (relative to /workspace)');

const execFields = {
  command: z
    .array(argString())
    .min(1)
    .max(256)
    .optional()
    .describe('argv to execute, e.g. ["python", "script.py"]; no shell unless you run one'),
  shell: argString().min(1).optional().describe('A shell command line, run with /bin/sh -c'),
  stdin: z.string().optional().describe('Text fed to the command on standard input'),
  env: z.array(EnvVarSchema).default([]).describe('Variables for this exec, over the session’s'),
  cwd: SessionPathSchema.optional().describe(
    'Working directory inside the workspace (default: the workspace itself)',
  ),
  timeoutSeconds: z
    .number()
    .int()
    .positive()
    .optional()
    .describe("Deadline of this exec in seconds; the session's default when absent, never above the ceiling"),
  background: z
    .boolean()
    .default(false)
    .describe('Return at once with the execId; read its output and result later, or kill it'),
  tty: z.boolean().default(false).describe('Run under a pseudo-terminal (REPLs, bash -i)'),
};

function oneCommand(
  req: { command?: string[] | undefined; shell?: string | undefined; env: EnvVar[] },
  ctx: z.RefinementCtx,
): void {
  if ((req.command === undefined) === (req.shell === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['command'], message: 'give exactly one of command or shell' });
  }
  const argv = req.command ?? ['/bin/sh', '-c', req.shell ?? ''];
  // The session's own variables take the other half (SessionRequestSchema).
  checkArgvEnv(
    ctx,
    req.shell === undefined ? 'command' : 'shell',
    [...argv, ...envStrings(req.env)],
    MAX_ARGV_ENV_BYTES / 2,
  );
}

export const ExecRequestSchema = z.object(execFields).strict().superRefine(oneCommand);
export type ExecRequest = z.infer<typeof ExecRequestSchema>;
export type ExecRequestInput = z.input<typeof ExecRequestSchema>;

const terminalSize = {
  cols: z.number().int().min(1).max(1000).describe('Terminal columns (tty)'),
  rows: z.number().int().min(1).max(1000).describe('Terminal rows (tty)'),
};

const { stdin: _stdin, background: _background, ...streamedExecFields } = execFields;

/**
 * The first message on the session WebSocket (GET /sessions/:id/exec/ws): an exec request whose
 * stdin is the socket's channel 0, with the terminal's size for a tty.
 */
export const WsExecStartSchema = z
  .object({
    ...streamedExecFields,
    cols: terminalSize.cols.default(80),
    rows: terminalSize.rows.default(24),
  })
  .strict()
  .superRefine(oneCommand);
export type WsExecStart = z.infer<typeof WsExecStartSchema>;
export type WsExecStartInput = z.input<typeof WsExecStartSchema>;

/** Channel 4 on the session WebSocket: a tty's new size. */
export const WsResizeSchema = z.object(terminalSize).strict();

/** An exec's outcome: the run result's field names, plus which exec and session it was. */
export const ExecResultSchema = RunResultSchema.omit({ runId: true }).extend({
  execId: z.string().describe('Identifier of the exec in its session'),
  sessionId: z.string().describe('The session the exec ran in'),
});
export type ExecResult = z.infer<typeof ExecResultSchema>;

/**
 * The events of a streamed exec (POST /sessions/:id/exec with Accept: application/x-ndjson, one
 * JSON object a line; or text/event-stream): started, its output as it comes, then its result.
 */
export const ExecEventSchema = z.discriminatedUnion('event', [
  z.object({ event: z.literal('started'), execId: z.string(), sessionId: z.string() }),
  z.object({ event: z.literal('output'), stream: z.enum(['stdout', 'stderr']), text: z.string() }),
  ExecResultSchema.extend({ event: z.literal('result') }),
]);
export type ExecEvent = z.infer<typeof ExecEventSchema>;

/** One finished exec in a session's history (`GET /sessions/:id/logs`). */
export const ExecLogEntrySchema = z.object({
  execId: z.string().describe('Identifier of the exec in its session'),
  argv: z.array(z.string()).describe('What it ran (a shell command is its shell’s argv)'),
  background: z.boolean().describe('Whether it ran in the background'),
  result: ExecResultSchema,
});
export type ExecLogEntry = z.infer<typeof ExecLogEntrySchema>;

/** A session's exec history, oldest first. */
export const ExecLogSchema = z.object({ execs: z.array(ExecLogEntrySchema) });

export const FILE_TYPES = ['file', 'directory', 'symlink', 'other'] as const;

export const FileEntrySchema = z.object({
  path: z.string().describe('Path relative to the workspace'),
  type: z.enum(FILE_TYPES).describe('What the entry is'),
  size: z.number().int().min(0).describe('Size in bytes (files)'),
  mode: z.string().describe('Permission bits, octal, e.g. 0644'),
  mtime: z.string().describe('Last modification (ISO 8601)'),
});
export type FileEntry = z.infer<typeof FileEntrySchema>;

/** A process that outlived its exec (setsid, a double fork): it lives until the session ends. */
export const SessionProcessSchema = z.object({
  pid: z.number().int().describe('Process id inside the sandbox'),
  command: z.string().describe('Its command line, cut short'),
  execId: z.string().optional().describe('The exec that started it, when known'),
});

export const SessionLimitsSchema = EffectiveLimitsSchema.extend({
  ttlSeconds: z.number().int().describe('Whole lifetime of the session in seconds'),
  idleTimeoutSeconds: z.number().int().describe('Idle time after which the session ends'),
  maxExecs: z.number().int().describe('Execs that may run at once'),
});

export const SessionSchema = z.object({
  id: z.string().describe('Identifier of the session'),
  state: SessionStateSchema,
  reason: SessionReasonSchema.optional(),
  message: z.string().optional().describe('Human-readable detail about the state'),
  template: z.string().optional().describe('Template the session runs'),
  image: z.string().describe('Image the sandbox runs'),
  runtime: z.string().optional().describe('Container runtime, when not the engine default'),
  backend: z.string().describe('The backend: docker, oci or kubernetes'),
  limits: SessionLimitsSchema.describe('Limits after policy; timeoutSeconds is the default per exec'),
  network: z.enum(EGRESS_MODES).describe('Egress: none, or allowlist'),
  allow: z
    .array(EgressEntryObjectSchema)
    .optional()
    .describe('What an allowlist session may reach (the proxy allows nothing else)'),
  env: z
    .array(z.string())
    .describe('Names of the session’s variables (secret ones included; never their values)'),
  createdAt: z.string().describe('When the session was created (ISO 8601)'),
  lastActivityAt: z.string().describe('Last exec or file operation (ISO 8601)'),
  expiresAt: z.string().describe('When the TTL ends it (ISO 8601)'),
  idleExpiresAt: z.string().describe('When it ends if nothing happens before (ISO 8601)'),
  endedAt: z.string().optional().describe('When it ended (ISO 8601)'),
  execs: z.number().int().describe('Execs run so far'),
  runningExecs: z.array(z.string()).describe('Ids of the execs running now'),
  processes: z.array(SessionProcessSchema).optional().describe('Processes that outlived their exec'),
});
export type Session = z.infer<typeof SessionSchema>;

export const SessionPatchSchema = z
  .object({
    ttlSeconds: z
      .number()
      .int()
      .positive()
      .describe('New whole lifetime, counted from creation; at most the ceiling'),
  })
  .strict();
export type SessionPatch = z.infer<typeof SessionPatchSchema>;
