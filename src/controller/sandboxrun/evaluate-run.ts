/**
 * evaluateRun(): the authoritative policy verdict on a SandboxRun (DESIGN.md §3): the spec is read
 * as the shared run request and given to the same evaluate() the Docker backend uses, and an
 * allowed run's job is encoded (it must fit its ConfigMap), with the runner's no-network check
 * unless the cluster enforces NetworkPolicy. Pure. The status's Admitted condition
 * reports the verdict.
 */
import { RunRequestSchema } from '../../api/run.js';
import { issuesToViolations } from '../../api/validate.js';
import {
  SandboxRunSpecSchema,
  toRunRequestInput,
  type SandboxRunSpec,
} from '../../api/v1alpha1/sandboxrun.js';
import { evaluate, type EffectiveSpec } from '../../policy/evaluate.js';
import type { Policy } from '../../policy/policy.js';
import { EGRESS_ENV_NAMES, encodeJob, type JobOptions } from '../../runner/protocol.js';
import { formatSize } from '../../shared/quantity.js';
import { denied, type Denial } from '../verdict.js';
import { MAX_RUN_FILES_BYTES } from '../../api/v1alpha1/run-files.js';
import { egressRefusal, type ClusterEgress } from '../pod/egress.js';
import { MAX_JOB_BYTES } from './build-config-map.js';

export type RunVerdict =
  { allowed: true; spec: SandboxRunSpec; effective: EffectiveSpec; job: Buffer } | Denial<SandboxRunSpec>;

export interface ClusterFacts {
  /** Declared in the config: the cluster enforces the run's deny-all NetworkPolicy. */
  networkPolicyEnforced: boolean;
  /** The egress proxy, when the cluster runs one: a run with an allowlist needs it. */
  egress?: ClusterEgress | undefined;
}

/**
 * The policy's evaluation of a run's spec alone, whatever the cluster: what the egress proxy reads
 * a run's allowlist from, so that it holds the run to exactly what the operator admitted.
 */
export function evaluateRunSpec(
  rawSpec: unknown,
  policy: Policy,
): Denial<SandboxRunSpec> | { allowed: true; spec: SandboxRunSpec; effective: EffectiveSpec } {
  const parsed = SandboxRunSpecSchema.safeParse(rawSpec ?? {});
  if (!parsed.success) return denied(undefined, 'invalid spec', issuesToViolations(parsed.error.issues));
  const spec = parsed.data;
  const request = RunRequestSchema.safeParse(toRunRequestInput(spec));
  if (!request.success) return denied(spec, 'invalid spec', issuesToViolations(request.error.issues));
  const evaluation = evaluate(request.data, policy);
  if (!evaluation.ok) return denied(spec, 'denied by policy', evaluation.violations);
  return { allowed: true, spec, effective: withRunFilesCap(evaluation.spec) };
}

export function evaluateRun(rawSpec: unknown, policy: Policy, cluster: ClusterFacts): RunVerdict {
  const evaluated = evaluateRunSpec(rawSpec, policy);
  if (!evaluated.allowed) return evaluated;
  const { spec, effective } = evaluated;
  const egress = effective.network.egress === 'allowlist';
  const refusal = egress ? egressRefusal(cluster.egress) : undefined;
  if (refusal) return denied(spec, 'denied by policy', [refusal]);
  const job = encodeJob(effective, runJobOptions(cluster, egress));
  if (job.length > MAX_JOB_BYTES) {
    return denied(spec, 'denied by policy', [
      {
        field: 'request',
        message: `code, files, stdin, argv and env encode to ${formatSize(job.length)}, more than a ConfigMap holds`,
        limit: formatSize(MAX_JOB_BYTES),
      },
    ]);
  }
  return { allowed: true, spec, effective, job };
}

/**
 * The files a run returns are kept in a ConfigMap (api/v1alpha1/run-files.ts): the runner collects
 * at most what one holds, and names every file past that with the cap.
 */
export function withRunFilesCap(spec: EffectiveSpec): EffectiveSpec {
  const caps = spec.outputs.caps;
  if (caps.maxBytes <= MAX_RUN_FILES_BYTES) return spec;
  return { ...spec, outputs: { ...spec.outputs, caps: { ...caps, maxBytes: MAX_RUN_FILES_BYTES } } };
}

/**
 * Egress none fails closed: unless the cluster is declared to enforce the run's deny-all
 * NetworkPolicy, the runner refuses the job in a sandbox with any interface but lo. An allowlisted
 * run (admitted only where NetworkPolicy is enforced) has the pod's network, cut down by its
 * policy to the proxy, and the runner passes on the proxy variables the pod has from its Secret.
 */
export function runJobOptions(cluster: ClusterFacts, egress: boolean): JobOptions {
  return egress
    ? { requireNoNetwork: false, inheritEnv: EGRESS_ENV_NAMES }
    : { requireNoNetwork: !cluster.networkPolicyEnforced };
}
