/**
 * Inputs and outputs of the session tools (sandbox_*), drawn from the session model in src/api.
 * As with the run tools, outputs declare only what a model acts on; the rest of the session model
 * passes through undeclared (docs/mcp.md).
 */
import * as z from 'zod';
import { ExecRequestSchema, SessionRequestSchema, SessionSchema } from '../../api/session.js';
import type { Policy } from '../../policy/policy.js';
import { networkListed, RunResultOutput, type ToolInput } from './schemas.js';

const E = ExecRequestSchema.shape;
const Q = SessionRequestSchema.shape;
const M = SessionSchema.shape;

const sessionId = z.string().min(1).max(64).describe('From sandbox_create');
const path = z.string().min(1).max(4096).describe('In the workspace, e.g. out/plot.png');

const tool = <L extends z.ZodObject>(listed: L, parse: z.ZodType = listed): ToolInput<L> => ({
  listed,
  parse,
});

export function buildSessionSchemas(policy: Policy) {
  const names = policy.templates.map((t) => t.name) as [string, ...string[]];
  const s = policy.sessions;
  const createListed = z
    .object({
      language: z.enum(names).optional().describe('Template; default python'),
      image: Q.image.describe('Allowlisted image instead of the template’s'),
      timeoutSeconds: z
        .number()
        .int()
        .min(1)
        .max(policy.ceilings.timeoutSeconds)
        .optional()
        .describe('Default deadline of each exec, s'),
      ttlSeconds: z
        .number()
        .int()
        .min(1)
        .max(s.maxTtlSeconds)
        .optional()
        .describe(`Lifetime, s; ${s.ttlSeconds}`),
      idleTimeoutSeconds: z
        .number()
        .int()
        .min(1)
        .max(s.maxIdleTimeoutSeconds)
        .optional()
        .describe(`Ends after this idle time, s; ${s.idleTimeoutSeconds}`),
      env: z
        .array(z.object({ name: z.string().describe('Name'), value: z.string().describe('Value') }).strict())
        .optional()
        .describe('Variables of every exec'),
      ...networkListed(policy),
    })
    .strict();
  const execListed = z
    .object({
      sessionId,
      command: E.command.describe('argv, e.g. ["python", "main.py"]'),
      shell: E.shell.describe('Or a sh -c line'),
      stdin: E.stdin.describe('Standard input'),
      cwd: z.string().optional().describe('In the workspace'),
      timeoutSeconds: z.number().int().min(1).optional().describe('Deadline, s; the session’s default'),
      background: z.boolean().optional().describe('Return the execId at once'),
      execId: z.string().optional().describe('Instead: the state of an earlier exec'),
      kill: z.boolean().optional().describe('With execId: kill it'),
    })
    .strict();
  const writeListed = z
    .object({
      sessionId,
      path,
      content: z.string().describe('Text or base64'),
      encoding: z.enum(['utf8', 'base64']).optional().describe('Of content; utf8'),
      append: z.boolean().optional().describe('Add to the end (write big files in parts)'),
      offset: z.number().int().min(0).optional().describe('Write at this byte'),
      mode: z.number().int().min(0).max(0o777).optional().describe('Permissions, e.g. 493 (0755)'),
    })
    .strict();
  const readListed = z.object({ sessionId, path }).strict();
  const listListed = z
    .object({
      sessionId,
      path: z.string().optional().describe('Directory; the workspace'),
      recursive: z.boolean().optional().describe('Descend'),
    })
    .strict();
  const bySession = z.object({ sessionId }).strict();
  return {
    create: tool(
      createListed,
      createListed.extend({ template: z.string().optional(), runtime: Q.runtime, network: Q.network }),
    ),
    exec: tool(execListed, execListed.extend({ env: E.env })),
    write: tool(writeListed),
    read: tool(readListed),
    list: tool(listListed),
    bySession: tool(bySession),
  };
}
export type SessionSchemas = ReturnType<typeof buildSessionSchemas>;

export const SessionOutput = z.looseObject({
  id: M.id.describe('sessionId'),
  state: M.state.describe('Creating, Ready, Expired, Deleted, Failed'),
  reason: z.string().optional().describe('Why'),
  expiresAt: M.expiresAt.describe('End of its TTL'),
  idleExpiresAt: M.idleExpiresAt.describe('End if idle'),
});

export const SessionListOutput = z.object({
  sessions: z.array(SessionOutput).describe('Yours, newest first'),
});

const { runId: _runId, ...runFields } = RunResultOutput.shape;
export const ExecResultOutput = z.looseObject({
  ...runFields,
  execId: z.string().describe('For execId, kill'),
  phase: z.string().describe('Running, Succeeded, Failed, TimedOut, …'),
});

export const FileEntryOutput = z.looseObject({
  path: z.string().describe('In the workspace'),
  type: z.string().describe('file, directory, symlink'),
  size: z.number().int().describe('Bytes'),
});

export const FileListOutput = z.object({ entries: z.array(FileEntryOutput).describe('Files') });

export const FileReadOutput = z.looseObject({
  path: z.string().describe('In the workspace'),
  size: z.number().int().describe('Bytes'),
  encoding: z.enum(['utf8', 'base64', 'none']).describe('Of content; none: see uri'),
  content: z.string().optional().describe('The file'),
  uri: z.string().describe('Its resource'),
});
