/**
 * The SandboxPool resource: ready, hardened pods kept per namespace so that a SandboxRun (mode
 * `run`) or a Sandbox (mode `session`) whose effective shape equals the pool's is served without
 * creating a pod. The one source of truth for its TypeScript types and for the generated CRD
 * (`crds/sandboxpools.sandpit.dev.yaml`), which has the `/scale` subresource, so an HPA or KEDA
 * can drive `spec.replicas`.
 *
 * The spec names the shape the way a run does (template, image, resources, runtimeClassName): the
 * operator puts it through the same policy as a run, and a run matches the pool when their
 * effective shapes are equal (src/policy/shape.ts). There is no best fit.
 */
import * as z from 'zod';
import { EGRESS_MODES } from '../egress.js';
import { ResourcesSchema, RunRequestSchema } from '../run.js';
import type { CrdDefinition } from './crd.js';
import { API_VERSION, defineKind } from './group.js';
import { conditionsSchema, ObjectMetaSchema, ObservedGenerationSchema } from './sandboxrun.js';

export const SANDBOX_POOL = defineKind('SandboxPool', 'sandboxpools', ['sbp']);

export const POOL_MODES = ['run', 'session'] as const;
export type PoolMode = (typeof POOL_MODES)[number];

/** The most ready pods one pool keeps. */
export const MAX_POOL_REPLICAS = 200;

const { template, image, runtime } = RunRequestSchema.shape;

export const SandboxPoolSpecSchema = z
  .object({
    template: template.describe('Named template the pool serves: python, python-data, node, bash, c or rust'),
    image: image.describe('Image override; must be in the image allowlist'),
    resources: ResourcesSchema.optional().describe(
      'Limits of every pod, below the policy ceilings; runs asking for the same limits are served',
    ),
    runtimeClassName: runtime.describe(
      'RuntimeClass of the pods (e.g. gvisor); the operator default when absent',
    ),
    egress: z
      .enum(EGRESS_MODES)
      .default('none')
      .describe(
        "allowlist: pods for runs with an egress allowlist (mode run): each carries the egress proxy's address, and a run's allowlist and credential come with its job",
      ),
    mode: z
      .enum(POOL_MODES)
      .default('run')
      .describe('run: pods serve one SandboxRun each (stdinOnce); session: pods serve one Sandbox each'),
    replicas: z
      .number()
      .int()
      .min(0)
      .max(MAX_POOL_REPLICAS)
      .default(1)
      .describe('Ready pods kept; the /scale subresource sets it'),
    maxIdleSeconds: z
      .number()
      .int()
      .min(30)
      .max(86_400)
      .default(3600)
      .describe('A ready pod older than this is replaced by a fresh one'),
  })
  .strict()
  .superRefine((spec, ctx) => {
    if (spec.template === undefined && spec.image === undefined) {
      ctx.addIssue({ code: 'custom', path: ['template'], message: 'give a template or an image' });
    }
    if (spec.egress === 'allowlist' && spec.mode === 'session') {
      ctx.addIssue({
        code: 'custom',
        path: ['egress'],
        message:
          "sessions with an egress allowlist are not served from pools (a pool pod cannot take a session's proxy credential): each gets a pod of its own; use mode run",
      });
    }
  });
export type SandboxPoolSpec = z.infer<typeof SandboxPoolSpecSchema>;
export type SandboxPoolSpecInput = z.input<typeof SandboxPoolSpecSchema>;

const count = (what: string) => z.number().int().min(0).optional().describe(what);

export const SandboxPoolStatusSchema = z.object({
  replicas: count('Pods of the pool not yet claimed: ready and starting (the /scale status)'),
  readyReplicas: count('Pods ready to serve'),
  startingReplicas: count('Pods created and not ready yet'),
  claimedReplicas: count('Pods claimed from the pool that still exist (serving, or ending)'),
  selector: z
    .string()
    .optional()
    .describe('Label selector of the unclaimed pods, for the /scale subresource'),
  message: z.string().optional().describe('Why the pool cannot serve, when it cannot'),
  conditions: conditionsSchema(
    'Ready (every wanted pod is ready), Stalled (the pool cannot be served: denied by policy) and Reconciling; each with its generation',
  ),
  observedGeneration: ObservedGenerationSchema,
});
export type SandboxPoolStatus = z.infer<typeof SandboxPoolStatusSchema>;

export const SandboxPoolSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(SANDBOX_POOL.kind),
  metadata: ObjectMetaSchema,
  spec: SandboxPoolSpecSchema,
  status: SandboxPoolStatusSchema.optional(),
});
/** A SandboxPool as plain JSON: a reader checks spec and status with the schemas above first. */
export type SandboxPool = z.input<typeof SandboxPoolSchema>;

export const SANDBOX_POOL_CRD: CrdDefinition = {
  kind: SANDBOX_POOL,
  description: `SandboxPool (${API_VERSION}) keeps ready, locked-down pods of one shape, so that runs and sessions of that shape start without creating a pod.`,
  spec: {
    schema: SandboxPoolSpecSchema,
    description: 'The shape of the pods, how many to keep ready, for how long',
  },
  status: {
    schema: SandboxPoolStatusSchema,
    description: 'How many pods are ready, starting and claimed, written by the operator',
  },
  scale: {
    specReplicasPath: '.spec.replicas',
    statusReplicasPath: '.status.replicas',
    labelSelectorPath: '.status.selector',
  },
  columns: [
    { name: 'Mode', type: 'string', jsonPath: '.spec.mode', description: 'run or session' },
    { name: 'Template', type: 'string', jsonPath: '.spec.template', description: 'The template it serves' },
    { name: 'Desired', type: 'integer', jsonPath: '.spec.replicas', description: 'Ready pods wanted' },
    { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas', description: 'Pods ready to serve' },
    {
      name: 'Starting',
      type: 'integer',
      jsonPath: '.status.startingReplicas',
      description: 'Pods not ready yet',
    },
    {
      name: 'Claimed',
      type: 'integer',
      jsonPath: '.status.claimedReplicas',
      description: 'Pods serving a run or session',
    },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
