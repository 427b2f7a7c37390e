/**
 * The audit record (DESIGN.md §5): one JSON line per run, per exec and per session event, in the
 * audit file and in the log, from the gateway and the operator alike. Who (the principal, never the
 * token), what (template, image, a command digest and an optional short preview; never env values
 * or file contents), within which limits, and how it ended.
 *
 * Defined here with zod rather than as an interface beside the writer, because the records are read
 * back: `sandpit audit` parses lines of a file that may end in a torn line or hold lines of another
 * version, and the session model (src/api) that session records describe is zod too. Unknown keys
 * are dropped on parse, not refused, so a reader keeps working across versions.
 */
import * as z from 'zod';
import { EffectiveLimitsSchema, PhaseSchema, ReasonSchema } from './run.js';
import { SessionLimitsSchema, SessionReasonSchema, SessionStateSchema } from './session.js';

export const SESSION_EVENTS = [
  'session.created',
  'session.expired',
  'session.deleted',
  'session.failed',
] as const;
export const AUDIT_EVENTS = ['run', 'exec', ...SESSION_EVENTS, 'egress'] as const;
export const AuditEventSchema = z.enum(AUDIT_EVENTS).describe('What the record is about');
export type AuditEvent = z.infer<typeof AuditEventSchema>;

/** Characters of argv or code a preview keeps (then `…`). */
export const PREVIEW_CHARS = 80;

export const AuditCommandSchema = z.object({
  digest: z
    .string()
    .regex(/^sha256:[0-9a-f]{64}$/)
    .describe('sha256 over argv, code, files and stdin: identifies what ran without revealing it'),
  preview: z
    .string()
    .optional()
    .describe(
      `The first ${PREVIEW_CHARS} characters of the code or argv, on one line (absent when audit.commandPreview is off)`,
    ),
});
export type AuditCommand = z.infer<typeof AuditCommandSchema>;

/** How a run or an exec ended: the run model's phase and reason. */
export const RunOutcomeSchema = z.object({
  phase: PhaseSchema,
  reason: ReasonSchema.optional(),
});

/** Where a session event leaves the session: its state and reason. */
export const SessionOutcomeSchema = z.object({
  phase: SessionStateSchema.describe("The session's state"),
  reason: SessionReasonSchema.optional(),
});

/** What every record has, whatever its event. */
const AuditBaseSchema = z.object({
  time: z.iso.datetime({ offset: true }).describe('When the event happened (ISO 8601, UTC)'),
  principal: z.string().min(1).describe("Who asked: the token's name, never the token"),
  backend: z.string().min(1).describe('docker, oci, kubernetes'),
  template: z.string().optional(),
  image: z.string().min(1),
  runtime: z.string().optional().describe('Container runtime or RuntimeClass'),
  network: z.string().describe('Egress: none, or the policy that allowed it'),
});

/** What a record of something that ran has: its limits, the command, its exit and its bytes. */
const executed = {
  limits: EffectiveLimitsSchema,
  command: AuditCommandSchema,
  exitCode: z.number().int().nullable().describe('null when the program never reported one'),
  durationMs: z.number().min(0),
  bytesIn: z.number().int().min(0).describe('Bytes of code, files and stdin'),
  bytesOut: z.number().int().min(0).describe('Bytes the program wrote to stdout and stderr'),
  outcome: RunOutcomeSchema,
};

export const RunAuditRecordSchema = AuditBaseSchema.extend({
  event: z.literal('run'),
  runId: z.string().min(1),
  ...executed,
});

export const ExecAuditRecordSchema = AuditBaseSchema.extend({
  event: z.literal('exec'),
  sessionId: z.string().min(1),
  execId: z.string().min(1),
  ...executed,
});

export const SessionAuditRecordSchema = AuditBaseSchema.extend({
  event: z.enum(SESSION_EVENTS),
  sessionId: z.string().min(1),
  limits: SessionLimitsSchema,
  durationMs: z.number().min(0).optional().describe("The session's lifetime so far"),
  bytesIn: z.number().int().min(0).optional().describe('Bytes written into the session'),
  bytesOut: z.number().int().min(0).optional().describe('Bytes read out of the session'),
  outcome: SessionOutcomeSchema,
});

/**
 * One connection through the egress proxy (or one plain-HTTP request, each its own connection
 * upstream): whose, what it asked for, the address the proxy dialed, the decision and the rule
 * that made it, and the bytes each way. The sandbox is `In`'s receiver and `Out`'s sender.
 */
export const EgressAuditRecordSchema = z.object({
  time: z.iso.datetime({ offset: true }).describe('When the connection ended (ISO 8601, UTC)'),
  event: z.literal('egress'),
  principal: z.string().min(1).describe("Who owns the sandbox: the token's name, never the token"),
  backend: z.string().min(1),
  runId: z.string().min(1).optional(),
  sessionId: z.string().min(1).optional(),
  method: z.string().min(1).max(32).describe('CONNECT, or the method of a plain-HTTP request'),
  host: z
    .string()
    .min(1)
    .max(300)
    .describe('The host the program asked for, as it asked (a name or an address)'),
  port: z.number().int().min(0).max(65535),
  address: z.string().optional().describe('The address the proxy dialed (absent when it dialed none)'),
  decision: z.enum(['allowed', 'denied']),
  rule: z.string().describe('What decided: the allowlist entry, or why it was refused'),
  error: z.string().optional().describe('What went wrong after an allowed decision (connect, limits)'),
  bytesOut: z.number().int().min(0).describe('Bytes the sandbox sent upstream'),
  bytesIn: z.number().int().min(0).describe('Bytes the sandbox received'),
  durationMs: z.number().min(0),
});
export type EgressAuditRecord = z.infer<typeof EgressAuditRecordSchema>;

export const AuditRecordSchema = z.discriminatedUnion('event', [
  RunAuditRecordSchema,
  ExecAuditRecordSchema,
  SessionAuditRecordSchema,
  EgressAuditRecordSchema,
]);
export type AuditRecord = z.infer<typeof AuditRecordSchema>;
export type RunAuditRecord = z.infer<typeof RunAuditRecordSchema>;
export type ExecAuditRecord = z.infer<typeof ExecAuditRecordSchema>;
export type SessionAuditRecord = z.infer<typeof SessionAuditRecordSchema>;
