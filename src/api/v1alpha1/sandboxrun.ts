/**
 * The SandboxRun resource (DESIGN.md §4): the one source of truth for its TypeScript types and for
 * the generated CRD (`crds/sandboxruns.sandpit.dev.yaml`). The spec is the shared run request with
 * `runtime` spelled `runtimeClassName`, plus the Kubernetes-only lifecycle fields; the status uses
 * the shared phases and reasons.
 */
import * as z from 'zod';
import { RunOutputsSchema } from '../outputs.js';
import { NetworkSpecSchema } from '../egress.js';
import { PhaseSchema, ReasonSchema, RunRequestSchema, type RunRequestInput } from '../run.js';
import type { CrdDefinition } from './crd.js';
import { API_VERSION, defineKind } from './group.js';

export const SANDBOX_RUN = defineKind('SandboxRun', 'sandboxruns', ['sbr']);

// An idempotency key is a gateway's: on Kubernetes it names the SandboxRun (r- and a digest), and
// a SandboxRun made with kubectl is its own key.
const { runtime, requestId: _key, ...requestShape } = RunRequestSchema.shape;

export const SandboxRunSpecSchema = z.object({
  ...requestShape,
  network: NetworkSpecSchema.optional().describe(
    'Network access: none by default; or an allowlist of hosts and ranges (objects) within the operator’s ceiling',
  ),
  runtimeClassName: runtime.describe(
    'RuntimeClass of the pod (e.g. gvisor); the operator default when absent',
  ),
  ttlSecondsAfterFinished: z
    .number()
    .int()
    .min(0)
    .max(31_536_000)
    .optional()
    .describe('Delete the run (and its pod) this many seconds after it finished; kept when absent'),
  pendingTimeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(86_400)
    .optional()
    .describe('Fail the run when its pod has not started this many seconds after creation'),
  cancel: z
    .boolean()
    .optional()
    .describe('Set to true to stop the run: it ends Cancelled and its pod is deleted'),
});
export type SandboxRunSpec = z.infer<typeof SandboxRunSpecSchema>;
export type SandboxRunSpecInput = z.input<typeof SandboxRunSpecSchema>;

export const CONDITION_STATUSES = ['True', 'False', 'Unknown'] as const;

export const ConditionSchema = z.object({
  type: z.string().min(1).max(316).describe('Condition type: Admitted, Started or Finished'),
  status: z.enum(CONDITION_STATUSES).describe('True, False or Unknown'),
  observedGeneration: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('The .metadata.generation the condition was computed from'),
  lastTransitionTime: z
    .string()
    .describe('When the status last changed (RFC 3339)')
    .meta({ format: 'date-time' }),
  reason: z.string().min(1).max(1024).describe('Machine-readable reason, CamelCase'),
  message: z.string().max(32_768).describe('Human-readable detail'),
});
export type Condition = z.infer<typeof ConditionSchema>;

/** A status's conditions: a list keyed by type (server-side apply merges them by type). */
export const conditionsSchema = (description: string) =>
  z
    .array(ConditionSchema)
    .optional()
    .describe(description)
    .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });

/** The generation a whole status reflects. */
export const ObservedGenerationSchema = z
  .number()
  .int()
  .min(0)
  .optional()
  .describe('The .metadata.generation this status reflects');

export const RunOutputSchema = z.object({
  tail: z
    .string()
    .min(1)
    .optional()
    .describe(
      'The last bytes the program wrote (stdout and stderr interleaved, as in the pod log); absent when it wrote nothing',
    ),
  truncated: z.boolean().describe('True when the tail is not the whole output'),
  bytes: z
    .number()
    .int()
    .min(0)
    .describe(
      "Bytes of output the program wrote: the runner's count, else what the operator read (up to its read limit)",
    ),
});
export type RunOutput = z.infer<typeof RunOutputSchema>;

const time = (what: string) =>
  z.string().describe(`${what} (RFC 3339)`).meta({ format: 'date-time' }).optional();

export const SandboxRunStatusSchema = z.object({
  phase: PhaseSchema.optional(),
  reason: ReasonSchema.optional(),
  message: z.string().optional().describe('Human-readable detail about the phase'),
  exitCode: z.number().int().optional().describe('Exit code of the program, once it has exited'),
  podName: z.string().optional().describe('The pod that runs (or ran) the program'),
  served: z
    .enum(['cold', 'warm'])
    .optional()
    .describe('warm: a ready pod of a SandboxPool served the run; cold: a pod was made for it'),
  pool: z.string().optional().describe('The SandboxPool whose pod served the run, when one did'),
  startTime: time('When the program started'),
  completionTime: time('When the run finished'),
  conditions: conditionsSchema(
    'Admitted, Started and Finished; Ready, Stalled and Reconciling for kstatus tools. Each with the generation it was computed from',
  ),
  output: RunOutputSchema.optional().describe(
    'A bounded tail of the output, so kubectl users see the result',
  ),
  outputs: RunOutputsSchema.optional().describe(
    'The files the run returned (spec.outputs), kept in its ConfigMap <pod>-files, and every entry or file not collected, with why',
  ),
  observedGeneration: ObservedGenerationSchema,
});
export type SandboxRunStatus = z.infer<typeof SandboxRunStatusSchema>;

/** The metadata fields sandpit reads; the rest passes through untouched. */
export const ObjectMetaSchema = z.looseObject({
  name: z.string(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  generation: z.number().int().optional(),
  resourceVersion: z.string().optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

/** A whole SandboxRun: metadata checked loosely, spec and status strictly. */
export const SandboxRunSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(SANDBOX_RUN.kind),
  metadata: ObjectMetaSchema,
  spec: SandboxRunSpecSchema,
  status: SandboxRunStatusSchema.optional(),
});
/**
 * A SandboxRun object: what the gateway creates, and what the operator and the gateway read back
 * (plain JSON). The apiserver holds it to the CRD's schema only, and anyone with RBAC writes it: a
 * reader checks the spec and the status with the schemas above before it trusts them.
 */
export type SandboxRun = z.input<typeof SandboxRunSchema>;

/** The shared run request a spec describes (`runtimeClassName` is the request's `runtime`). */
/** The fields a spec has besides its request: how long it waits, lives on, and its cancel switch. */
type LifecycleFields = 'runtimeClassName' | 'ttlSecondsAfterFinished' | 'pendingTimeoutSeconds' | 'cancel';

/** A SandboxRun's or a Sandbox's spec as the request it stands for: runtimeClassName spelled runtime. */
export function requestOfSpec<T extends { [K in LifecycleFields]?: unknown }>(
  spec: T,
): Omit<T, LifecycleFields> & { runtime?: T['runtimeClassName'] } {
  const {
    runtimeClassName,
    ttlSecondsAfterFinished: _ttl,
    pendingTimeoutSeconds: _pending,
    cancel: _cancel,
    ...rest
  } = spec;
  return { ...rest, ...(runtimeClassName !== undefined ? { runtime: runtimeClassName } : {}) };
}

export function toRunRequestInput(spec: SandboxRunSpec): RunRequestInput {
  return requestOfSpec(spec);
}

/** The SandboxRun CRD: its names, schemas and `kubectl get` columns. */
export const SANDBOX_RUN_CRD: CrdDefinition = {
  kind: SANDBOX_RUN,
  description: `SandboxRun (${API_VERSION}) runs untrusted code once in a locked-down pod and records the outcome.`,
  spec: { schema: SandboxRunSpecSchema, description: 'What to run, and with which limits' },
  status: { schema: SandboxRunStatusSchema, description: 'What happened, written by the operator' },
  columns: [
    { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Lifecycle phase of the run' },
    {
      name: 'Reason',
      type: 'string',
      jsonPath: '.status.reason',
      description: 'Why the run is in its phase',
    },
    {
      name: 'Exit Code',
      type: 'integer',
      jsonPath: '.status.exitCode',
      description: 'Exit code of the program',
    },
    {
      name: 'Pod',
      type: 'string',
      jsonPath: '.status.podName',
      priority: 1,
      description: 'The pod of the run',
    },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
