/**
 * The run store of the Kubernetes backend: the SandboxRun objects themselves, so that `get_run` and
 * `cancel_run` work on every gateway replica, not only the one that follows the run. A run is
 * looked for only in its owner's namespace and answered only when its owner annotation is the
 * owner's principal id: another tenant's run, or another token's, is "not found", never
 * "forbidden". A cancel sets spec.cancel; the operator stops the run, and the replica that follows
 * it sees it end Cancelled.
 */
import { RunRequestSchema, isTerminal } from '../../api/run.js';
import type { RunSubject } from '../../api/result.js';
import { ANNOTATION_OWNER } from '../../api/v1alpha1/labels.js';
import { SandboxRunSpecSchema, toRunRequestInput, type SandboxRun } from '../../api/v1alpha1/sandboxrun.js';
import { evaluate } from '../../policy/evaluate.js';
import type { Policy } from '../../policy/policy.js';
import { AppError } from '../../shared/errors.js';
import type { RunOwner, RunRecords } from '../types.js';
import { LABEL_TASK_OF, principalLabelValue } from './build-sandbox-run.js';
import { resultFromRecord } from './run-result.js';
import type { ObjectRef, RunApi } from './run-api.js';

export interface RunRecordsOptions {
  api: RunApi;
  /** Where the runs of an owner without a namespace are (the backend's own). */
  namespace: string;
  /** The policy the gateway decided its runs by: what ran (the limits) is its decision on the spec. */
  policy: Policy;
  /** How long a cancel waits for the operator to end the run. */
  cancelWaitMs: number;
  watchTimeoutSeconds: number;
}

/** An object name (DNS-1123 label): anything else cannot name a run, and is not asked for. */
const RUN_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The owner's run by id, in the owner's namespace; undefined for another's, or none. */
export async function findOwnedRun(
  o: Pick<RunRecordsOptions, 'api' | 'namespace'>,
  runId: string,
  owner: RunOwner,
): Promise<{ ref: ObjectRef; run: SandboxRun } | undefined> {
  if (!RUN_NAME.test(runId)) return undefined;
  const ref = { namespace: owner.namespace ?? o.namespace, name: runId };
  const run = await o.api.getRun(ref);
  return run && run.metadata.annotations?.[ANNOTATION_OWNER] === owner.id ? { ref, run } : undefined;
}

export function createRunRecords(o: RunRecordsOptions): RunRecords {
  const find = (runId: string, owner: RunOwner) => findOwnedRun(o, runId, owner);
  const answer = (run: SandboxRun) => resultFromRecord(run, subjectOf(run, o.policy));

  return {
    async get(runId, owner) {
      const found = await find(runId, owner);
      return found && answer(found.run);
    },

    async cancel(runId, owner) {
      const found = await find(runId, owner);
      if (!found) return undefined;
      if (finished(found.run)) return answer(found.run);
      try {
        await o.api.cancelRun(found.ref);
      } catch (e) {
        if (e instanceof AppError && e.code === 'NOT_FOUND') return undefined;
        throw e;
      }
      let latest = found.run;
      const stop = new AbortController();
      const timer = setTimeout(() => stop.abort(), o.cancelWaitMs);
      try {
        await o.api.followRun(found.ref, {
          resourceVersion: found.run.metadata.resourceVersion,
          onObject: (obj) => {
            latest = obj;
            return finished(obj);
          },
          watchTimeoutSeconds: o.watchTimeoutSeconds,
          signal: stop.signal,
        });
      } finally {
        clearTimeout(timer);
      }
      return answer(latest);
    },

    async tasks(owner, max) {
      const namespace = owner.namespace ?? o.namespace;
      const runs = await o.api.listRuns(namespace, `${LABEL_TASK_OF}=${principalLabelValue(owner.id)}`);
      return runs
        .filter((r) => r.metadata.annotations?.[ANNOTATION_OWNER] === owner.id)
        .map((r) => ({
          runId: r.metadata.name,
          createdAt: Date.parse(r.metadata.creationTimestamp ?? '') || 0,
        }))
        .sort((a, b) => b.createdAt - a.createdAt)
        .slice(0, max);
    },
  };
}

function finished(run: SandboxRun): boolean {
  const phase = run.status?.phase;
  return phase !== undefined && isTerminal(phase);
}

/**
 * What ran: the policy's decision on the SandboxRun's spec, which the gateway wrote as its decision
 * (build-sandbox-run.ts), so the same policy reaches it again. Should the policy have changed since
 * so that it no longer allows the spec, the image and template are the spec's and the limits the
 * policy's ceilings. Pure.
 */
export function subjectOf(run: SandboxRun, policy: Policy): RunSubject {
  const spec = SandboxRunSpecSchema.safeParse(run.spec);
  const request = spec.success ? RunRequestSchema.safeParse(toRunRequestInput(spec.data)) : undefined;
  const evaluation = request?.success ? evaluate(request.data, policy) : undefined;
  if (evaluation?.ok) return evaluation.spec;
  const c = policy.ceilings;
  return {
    template: run.spec.template,
    image: run.spec.image ?? '',
    runtime: run.spec.runtimeClassName,
    limits: {
      cpuMilli: c.cpuMilli,
      memoryBytes: c.memoryBytes,
      pids: c.pids,
      workspaceBytes: c.workspaceBytes,
      tmpBytes: c.tmpBytes,
      timeoutSeconds: c.timeoutSeconds,
      outputBytes: c.outputBytes,
      fileSizeBytes: c.workspaceBytes,
      openFiles: 0,
    },
  };
}
