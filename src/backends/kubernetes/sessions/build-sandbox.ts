/**
 * buildSandbox(): the Sandbox the gateway creates for one evaluated session. Pure. Like
 * buildSandboxRun(), the spec is the effective decision written back as a request (image, limits,
 * runtime, lifetimes), so the operator's own evaluation reaches the same decision. Secrets are
 * never in it: they travel to the runner in the open request only.
 */
import { networkSpec } from '../../../api/egress.js';
import {
  ANNOTATION_PRINCIPAL,
  ANNOTATION_SESSION_FACTS,
  LABEL_MANAGED_BY,
  LABEL_SESSION,
  labelValueFor,
} from '../../../api/v1alpha1/labels.js';
import { SANDBOX, type Sandbox, type SandboxSpecInput } from '../../../api/v1alpha1/sandbox.js';
import type { EffectiveSessionSpec } from '../../../policy/session.js';
import { formatCpu, formatSize } from '../../../shared/quantity.js';
import { LABEL_PRINCIPAL, MANAGED_BY_GATEWAY, principalLabelValue } from '../build-sandbox-run.js';
import { sessionFacts } from './listed-session.js';

export interface BuildSandboxOptions {
  /** The session id: the Sandbox's name (and its Lease's). */
  sessionId: string;
  namespace: string;
  /** Who owns the session: its annotation (read back by any replica) and hashed as a label. */
  principal: string;
  /** When the gateway made the session's record (ms): in its facts annotation. */
  createdAt: number;
  ttlSecondsAfterFinished: number;
  pendingTimeoutSeconds: number;
  /** Extra labels; the system labels are applied after them, so they cannot be overridden. */
  labels?: Readonly<Record<string, string>>;
}

export function buildSandbox(spec: EffectiveSessionSpec, options: BuildSandboxOptions): Sandbox {
  return {
    apiVersion: SANDBOX.apiVersion,
    kind: SANDBOX.kind,
    metadata: {
      name: options.sessionId,
      namespace: options.namespace,
      labels: {
        ...options.labels,
        [LABEL_MANAGED_BY]: MANAGED_BY_GATEWAY,
        [LABEL_SESSION]: labelValueFor(options.sessionId),
        [LABEL_PRINCIPAL]: principalLabelValue(options.principal),
      },
      annotations: {
        [ANNOTATION_PRINCIPAL]: options.principal,
        [ANNOTATION_SESSION_FACTS]: sessionFacts(spec, options.createdAt),
      },
    },
    spec: buildSpec(spec, options),
  };
}

function buildSpec(spec: EffectiveSessionSpec, options: BuildSandboxOptions): SandboxSpecInput {
  const { limits } = spec;
  return {
    ...(spec.template !== undefined ? { template: spec.template } : {}),
    image: spec.image,
    resources: {
      cpu: formatCpu(limits.cpuMilli),
      memory: formatSize(limits.memoryBytes),
      pids: limits.pids,
      ephemeralStorage: formatSize(limits.workspaceBytes),
    },
    network: networkSpec(spec.network),
    ...(spec.runtime !== undefined ? { runtimeClassName: spec.runtime } : {}),
    ttlSeconds: spec.ttlSeconds,
    idleTimeoutSeconds: spec.idleTimeoutSeconds,
    timeoutSeconds: limits.timeoutSeconds,
    env: spec.env.map((e) => ({ name: e.name, value: e.value })),
    ttlSecondsAfterFinished: options.ttlSecondsAfterFinished,
    pendingTimeoutSeconds: options.pendingTimeoutSeconds,
  };
}
