/**
 * What the gateway checks before it attaches to a session pod, and how a failed Sandbox reads as
 * the typed errors the Docker backend gives. Pure.
 *
 * RBAC cannot select by label, so the gateway's identity could attach to any pod in its namespace:
 * this check is the guard. The pod must be the one the Sandbox's status names, its controller
 * ownerReference must be that Sandbox (by uid), and the Sandbox must be sandpit's and the caller's.
 */
import { ANNOTATION_PRINCIPAL, LABEL_MANAGED_BY } from '../../../api/v1alpha1/labels.js';
import type { SessionReason } from '../../../api/session.js';
import { SANDBOX, type SandboxStatus } from '../../../api/v1alpha1/sandbox.js';
import type { KubeObject, Pod } from '../../../kube/objects.js';
import { AppError } from '../../../shared/errors.js';
import { MANAGED_BY_GATEWAY } from '../build-sandbox-run.js';

/** A Sandbox as the gateway reads it: metadata, its spec unchecked, and the operator's status. */
export interface SandboxObject extends KubeObject {
  spec?: unknown;
  status?: SandboxStatus;
}

/** Why the gateway refuses this pod, or undefined when it may attach. */
export function ownershipProblem(sandbox: SandboxObject, pod: Pod, principal: string): string | undefined {
  return sandboxProblem(sandbox, principal) ?? podProblem(sandbox, pod);
}

function sandboxProblem(sandbox: SandboxObject, principal: string): string | undefined {
  const meta = sandbox.metadata ?? {};
  const name = `${meta.namespace}/${meta.name}`;
  if (meta.labels?.[LABEL_MANAGED_BY] !== MANAGED_BY_GATEWAY)
    return `Sandbox ${name} was not made by sandpit's gateway`;
  if (meta.annotations?.[ANNOTATION_PRINCIPAL] !== principal)
    return `Sandbox ${name} belongs to another principal`;
  return undefined;
}

function podProblem(sandbox: SandboxObject, pod: Pod): string | undefined {
  const meta = sandbox.metadata ?? {};
  const name = `${meta.namespace}/${meta.name}`;
  const podName = sandbox.status?.podName;
  if (!podName || pod.metadata?.name !== podName)
    return `pod ${pod.metadata?.name} is not the pod Sandbox ${name} names`;
  if (pod.metadata?.namespace !== meta.namespace) return `pod ${podName} is in another namespace`;
  const controlled = controlledBy(pod, sandbox);
  return controlled ? undefined : `pod ${podName} is not controlled by Sandbox ${name} (uid ${meta.uid})`;
}

/** Whether the pod's controller ownerReference is this Sandbox (kind, name and uid). */
function controlledBy(pod: Pod, sandbox: SandboxObject): boolean {
  const { name, uid } = sandbox.metadata ?? {};
  const ref = pod.metadata?.ownerReferences?.find((r) => r.controller === true);
  if (!ref || !uid) return false;
  return (
    ref.kind === SANDBOX.kind && ref.apiVersion === SANDBOX.apiVersion && ref.name === name && ref.uid === uid
  );
}

/** The refusal when ownershipProblem() found one. */
export function refuseAttach(problem: string): AppError {
  return new AppError('FORBIDDEN', `the gateway refuses to attach: ${problem}`, {
    hint: 'only pods the operator made for a sandpit Sandbox are entered',
  });
}

const BUSY_HINT = 'the cluster has no room for it now: wait for sessions to end, or ask for smaller limits';

/** The typed error of each reason a Sandbox can fail for before it is ready; others are BACKEND_ERROR. */
const FAILURES: Partial<Record<SessionReason, (message: string, image: string) => AppError>> = {
  ImageNotFound: (message, image) =>
    new AppError('IMAGE_NOT_FOUND', `image ${image} is not present on the node: ${message}`, {
      hint: 'build the sandbox images with `sandpit images build` and load them onto the nodes, or push them to the registry the cluster pulls from',
    }),
  PolicyDenied: (message) => new AppError('POLICY_DENIED', `the operator refused the session: ${message}`),
  Unschedulable: (message) =>
    new AppError('BUSY', `busy, retry later: the session pod cannot be scheduled: ${message}`, {
      hint: BUSY_HINT,
    }),
  PendingTimeout: (message) =>
    new AppError('BUSY', `busy, retry later: the session pod did not start in time: ${message}`, {
      hint: BUSY_HINT,
    }),
};

/** The typed error of a Sandbox that failed before it was ready (as Docker reports the same failure). */
export function sandboxFailure(status: SandboxStatus, image: string): AppError {
  const message =
    status.message ?? `the Sandbox ended ${status.phase ?? 'Failed'} (${status.reason ?? 'no reason'})`;
  const known = status.reason && FAILURES[status.reason];
  if (known) return known(message, image);
  if (/runtimeclass/i.test(message))
    return new AppError('RUNTIME_NOT_FOUND', `the cluster has no such RuntimeClass: ${message}`, {
      hint: 'install the RuntimeClass (deploy/runtimeclass-*.yaml), or choose another runtime',
    });
  return new AppError('BACKEND_ERROR', `the session's Sandbox failed: ${message}`);
}
