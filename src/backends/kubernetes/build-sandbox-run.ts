/**
 * buildSandboxRun(): the SandboxRun the gateway creates for one evaluated run. Pure: the same spec
 * and options give the same object. The spec is the effective decision written back as a request
 * (explicit argv, image, limits and runtime), so the operator's own evaluate() reaches the same
 * decision, and nothing depends on the two sides having the same template defaults.
 */
import { networkSpec } from '../../api/egress.js';
import { createHash } from 'node:crypto';
import {
  ANNOTATION_OWNER,
  ANNOTATION_PRINCIPAL,
  ANNOTATION_REQUEST_DIGEST,
  LABEL_MANAGED_BY,
  LABEL_RUN,
  labelValueFor,
} from '../../api/v1alpha1/labels.js';
import { SANDBOX_RUN, type SandboxRun, type SandboxRunSpecInput } from '../../api/v1alpha1/sandboxrun.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import { formatCpu, formatSize } from '../../shared/quantity.js';

export const MANAGED_BY_GATEWAY = 'sandpit-gateway';
/** A hash of who asked for the run: selectable (`-l sandpit.dev/principal=…`) without exposing the name. */
export const LABEL_PRINCIPAL = 'sandpit.dev/principal';
/**
 * On the run of an MCP task: a hash of its owner's principal id, as LABEL_PRINCIPAL's, so that any
 * gateway process lists the owner's tasks by selector (tasks/list).
 */
export const LABEL_TASK_OF = 'sandpit.dev/task-of';

export interface BuildOptions {
  /**
   * The gateway's run id: the SandboxRun's name (a DNS label: `run-` and 12 hex digits, or for a
   * run under an idempotency key `r-` and 16 hex digits of sha256(owner, key)).
   */
  runId: string;
  namespace: string;
  /** Who asked for the run; written as an annotation (the operator's audit record) and hashed as a label. */
  principal: string;
  /** The owner's principal id, written as an annotation: what every gateway replica checks ownership by. */
  owner?: string | undefined;
  /** The request's digest, for a run under an idempotency key (the conflict check of a repeat). */
  requestDigest?: string | undefined;
  /** The run backs an MCP task of its owner's: labelled so (LABEL_TASK_OF). */
  task?: boolean | undefined;
  ttlSecondsAfterFinished: number;
  pendingTimeoutSeconds: number;
  /** Extra labels; the system labels are applied after them, so they cannot be overridden. */
  labels?: Readonly<Record<string, string>>;
}

/** `p-` and 20 hex digits of sha256(principal): a valid label value for any name. */
export function principalLabelValue(principal: string): string {
  return `p-${createHash('sha256').update(principal).digest('hex').slice(0, 20)}`;
}

export function buildSandboxRun(spec: EffectiveSpec, options: BuildOptions): SandboxRun {
  return {
    apiVersion: SANDBOX_RUN.apiVersion,
    kind: SANDBOX_RUN.kind,
    metadata: {
      name: options.runId,
      namespace: options.namespace,
      labels: {
        ...withoutTaskLabel(options.labels),
        [LABEL_MANAGED_BY]: MANAGED_BY_GATEWAY,
        [LABEL_RUN]: labelValueFor(options.runId),
        [LABEL_PRINCIPAL]: principalLabelValue(options.principal),
        ...(options.task && options.owner !== undefined
          ? { [LABEL_TASK_OF]: principalLabelValue(options.owner) }
          : {}),
      },
      annotations: {
        [ANNOTATION_PRINCIPAL]: options.principal,
        ...(options.owner !== undefined ? { [ANNOTATION_OWNER]: options.owner } : {}),
        ...(options.requestDigest !== undefined
          ? { [ANNOTATION_REQUEST_DIGEST]: options.requestDigest }
          : {}),
      },
    },
    spec: buildSpec(spec, options),
  };
}

/** Extra labels never mark a run as a task: only `task` does. */
function withoutTaskLabel(labels: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const { [LABEL_TASK_OF]: _task, ...rest } = labels ?? {};
  return rest;
}

function buildSpec(spec: EffectiveSpec, options: BuildOptions): SandboxRunSpecInput {
  const { limits } = spec;
  return {
    ...(spec.template !== undefined ? { template: spec.template } : {}),
    image: spec.image,
    ...(spec.code ? { code: spec.code.content.toString('utf8') } : {}),
    command: [...spec.argv],
    files: spec.files.map((f) => ({
      path: f.path,
      content: f.content.toString('base64'),
      encoding: 'base64' as const,
      ...(f.executable ? { executable: true } : {}),
    })),
    ...(spec.stdin.length > 0 ? { stdin: spec.stdin.toString('utf8') } : {}),
    env: spec.env.map((e) => ({ name: e.name, value: e.value })),
    resources: {
      cpu: formatCpu(limits.cpuMilli),
      memory: formatSize(limits.memoryBytes),
      pids: limits.pids,
      ephemeralStorage: formatSize(limits.workspaceBytes),
    },
    timeoutSeconds: limits.timeoutSeconds,
    network: networkSpec(spec.network),
    ...(spec.runtime !== undefined ? { runtimeClassName: spec.runtime } : {}),
    // Always written (none is []): a template's default is resolved here, once.
    outputs: [...spec.outputs.entries, ...spec.outputs.refused.map((r) => r.entry)],
    ttlSecondsAfterFinished: options.ttlSecondsAfterFinished,
    pendingTimeoutSeconds: options.pendingTimeoutSeconds,
  };
}
