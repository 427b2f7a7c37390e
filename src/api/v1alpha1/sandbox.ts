/**
 * The Sandbox resource (DESIGN.md §4): a session on Kubernetes. The one source of truth for its
 * TypeScript types and for the generated CRD (`crds/sandboxes.sandpit.dev.yaml`). The spec is the
 * session request with `runtime` spelled `runtimeClassName` and without `secrets` (they travel to
 * the runner in the gateway's open request only, never into an object anyone with RBAC can read),
 * plus the lifecycle fields a SandboxRun has. The status uses the session model's states and
 * reasons; the operator owns it, and the gateway never writes it.
 *
 * Activity is not in the object: the gateway renews the session's Lease (same name, same
 * namespace, owned by the Sandbox) at most every ACTIVITY_WRITE_SECONDS, and the operator reads
 * its renewTime as the last activity.
 */
import * as z from 'zod';
import { NetworkSpecSchema } from '../egress.js';
import {
  SessionReasonSchema,
  SessionRequestSchema,
  SessionStateSchema,
  type SessionRequestInput,
} from '../session.js';
import type { CrdDefinition } from './crd.js';
import { API_VERSION, defineKind } from './group.js';
import { conditionsSchema, ObjectMetaSchema, ObservedGenerationSchema, requestOfSpec } from './sandboxrun.js';

export const SANDBOX = defineKind('Sandbox', 'sandboxes', ['sbx']);

/** The gateway writes a session's activity at most this often (on the trailing edge). */
export const ACTIVITY_WRITE_SECONDS = 10;
/** The operator expires an idle session this long after lastActivity + idleTimeoutSeconds. */
export const IDLE_SLACK_SECONDS = ACTIVITY_WRITE_SECONDS;
/** This backend refuses an idle timeout under this (activity is only known to ±10 s). */
export const MIN_IDLE_TIMEOUT_SECONDS = 60;

const { runtime, secrets: _secrets, ...requestShape } = SessionRequestSchema.shape;

export const SandboxSpecSchema = z.object({
  ...requestShape,
  network: NetworkSpecSchema.optional().describe(
    'Network access: none by default; or an allowlist of hosts and ranges (objects) within the operator’s ceiling',
  ),
  runtimeClassName: runtime.describe(
    'RuntimeClass of the pod (e.g. gvisor); the operator default when absent',
  ),
  idleTimeoutSeconds: z
    .number()
    .int()
    .min(MIN_IDLE_TIMEOUT_SECONDS)
    .max(31_536_000)
    .optional()
    .describe(
      "End the session after this many seconds without activity through sandpit (its Lease's renewTime); none when absent. kubectl exec is not activity",
    ),
  ttlSecondsAfterFinished: z
    .number()
    .int()
    .min(0)
    .max(31_536_000)
    .optional()
    .describe('Delete the Sandbox this many seconds after it ended; kept when absent'),
  pendingTimeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(86_400)
    .optional()
    .describe('Fail the Sandbox when its pod is not ready this many seconds after creation'),
  cancel: z
    .boolean()
    .optional()
    .describe('Set to true to end the session: it ends Deleted and its pod is deleted'),
});
export type SandboxSpec = z.infer<typeof SandboxSpecSchema>;
export type SandboxSpecInput = z.input<typeof SandboxSpecSchema>;

/** The spec as the session request it stands for (no secrets: they never enter an object). */
export function toSessionRequestInput(spec: SandboxSpec): SessionRequestInput {
  return requestOfSpec(spec);
}

const time = (what: string) =>
  z.string().describe(`${what} (RFC 3339)`).meta({ format: 'date-time' }).optional();

export const SandboxStatusSchema = z.object({
  phase: SessionStateSchema.optional(),
  reason: SessionReasonSchema.optional(),
  message: z.string().optional().describe('Human-readable detail about the phase'),
  podName: z.string().optional().describe('The pod the session runs in'),
  served: z
    .enum(['cold', 'warm'])
    .optional()
    .describe('warm: a ready pod of a SandboxPool serves the session; cold: a pod was made for it'),
  pool: z.string().optional().describe('The SandboxPool whose pod serves the session, when one does'),
  readyTime: time('When the pod was ready and its runner answered'),
  // A string column: kubectl prints a future `date` column as <invalid>.
  expiresAt: time('When the session reaches its ttlSeconds'),
  lastActivity: time("The last activity sandpit saw (the session Lease's renewTime)"),
  finishedTime: time('When the session ended'),
  conditions: conditionsSchema(
    'Ready (the pod is ready and its runner answered), Stalled and Reconciling; each with its generation',
  ),
  observedGeneration: ObservedGenerationSchema,
});
export type SandboxStatus = z.infer<typeof SandboxStatusSchema>;

/** A whole Sandbox: metadata checked loosely, spec and status strictly. */
export const SandboxSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(SANDBOX.kind),
  metadata: ObjectMetaSchema,
  spec: SandboxSpecSchema,
  status: SandboxStatusSchema.optional(),
});
/** A Sandbox object as plain JSON: a reader checks spec and status with the schemas above first. */
export type Sandbox = z.input<typeof SandboxSchema>;

/** The Sandbox CRD: its names, schemas and `kubectl get` columns. */
export const SANDBOX_CRD: CrdDefinition = {
  kind: SANDBOX,
  description: `Sandbox (${API_VERSION}) is a locked-down pod that lives across commands: a session, entered through the sandpit gateway or kubectl exec.`,
  spec: { schema: SandboxSpecSchema, description: 'What the sandbox runs, with which limits, for how long' },
  status: { schema: SandboxStatusSchema, description: 'Where the session is, written by the operator' },
  columns: [
    {
      name: 'Phase',
      type: 'string',
      jsonPath: '.status.phase',
      description: 'Lifecycle state of the session',
    },
    { name: 'Reason', type: 'string', jsonPath: '.status.reason', description: 'Why it is in its state' },
    { name: 'Template', type: 'string', jsonPath: '.spec.template', description: 'The template it runs' },
    {
      name: 'Expires',
      type: 'string',
      jsonPath: '.status.expiresAt',
      description: 'When its whole lifetime ends',
    },
    {
      name: 'Last Activity',
      type: 'date',
      jsonPath: '.status.lastActivity',
      description: 'The last exec or file operation through sandpit',
    },
    { name: 'Pod', type: 'string', jsonPath: '.status.podName', priority: 1, description: 'Its pod' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
