/**
 * The apiserver's refusals as the errors a gateway operator can act on: an unreachable apiserver,
 * a missing CRD, a missing namespace and missing RBAC each say what to run. Pure.
 */
import { crdName } from '../../api/v1alpha1/group.js';
import { SANDBOX } from '../../api/v1alpha1/sandbox.js';
import { SANDBOX_RUN } from '../../api/v1alpha1/sandboxrun.js';
import { KubeApiError, toKubeError } from '../../kube/errors.js';
import { AppError, busy } from '../../shared/errors.js';
import { GATEWAY_LEASE_ROLE, GATEWAY_ROLE } from './permissions.js';

export interface CallContext {
  /** `create`, `watch`, … */
  verb: string;
  /** `sandboxruns`, `pods/log`, `leases` */
  resource: string;
  namespace: string;
  /** The apiserver URL, for messages. */
  server: string;
}

const CRD_NAME = crdName(SANDBOX_RUN);

export const CRD_HINT = `install the CRD with \`kubectl apply -f crds/\` (${CRD_NAME}), then start the operator (deploy/README.md)`;

export function unreachableHint(server: string): string {
  return (
    `check that the cluster is up and that kubernetes.gateway.kubeconfig (or KUBECONFIG) points at it: ` +
    `\`kubectl get --raw /readyz\` against ${server} should answer ok`
  );
}

export function rbacHint(ctx: Pick<CallContext, 'resource' | 'namespace'>): string {
  const lease = ctx.resource === 'leases';
  const role = lease ? GATEWAY_LEASE_ROLE : GATEWAY_ROLE;
  return (
    `grant the gateway's identity the verbs in deploy/gateway-rbac.yaml: \`kubectl apply -f deploy/gateway-rbac.yaml\`, ` +
    `and bind ClusterRole ${role} to it with a RoleBinding in namespace ${ctx.namespace}`
  );
}

const NAMESPACE_MISSING = /namespaces? "([^"]+)" not found/;
/** `sandboxruns.sandpit.dev "run-1" not found`: the object is gone (a missing API says "could not find the requested resource"). */
const OBJECT_MISSING = /"[^"]+" not found/;

/**
 * The apiserver's quota refusal, `exceeded quota: <name>, requested: <resource>=1, used:
 * <resource>=2, limited: <resource>=2`, as the gateway's busy error naming the quota.
 */
const QUOTA = /exceeded quota: ([^,\s]+)(?:, requested: ([^,]+), used: ([^,]+), limited: (.+))?/;

function quotaExceeded(err: KubeApiError, ctx: CallContext): AppError {
  const m = QUOTA.exec(err.message);
  const name = m?.[1] ?? 'unknown';
  const resource = ctx.resource === 'sandboxes' ? 'sessions' : 'runs';
  const limits = m?.[4] ? ` (used ${m[3]}, limited ${m[4]})` : '';
  return busy(`ResourceQuota ${name} in namespace ${ctx.namespace} allows no more ${resource}${limits}`, {
    hint: `wait for ${resource} to end and their records to expire (ttlSecondsAfterFinished), or raise ResourceQuota ${name}`,
    cause: err,
  });
}

/** `status unknown for quota: <name>, resources: <resources>`: a quota whose usage is not counted yet. */
const QUOTA_UNCOUNTED = /status unknown for quota: ([^,\s]+)(?:, resources: (\S+))?/;

/**
 * The apiserver refuses every object a quota limits until the quota controller has counted them.
 * For a custom resource it counts only once it has discovered the CRD, and a quota made before that
 * waits for the controller's full resync: a chart that installs the CRDs and a tenant quota
 * together is refused for up to 5 minutes.
 */
function quotaUncounted(err: KubeApiError, ctx: CallContext): AppError {
  const m = QUOTA_UNCOUNTED.exec(err.message);
  const name = m?.[1] ?? 'unknown';
  const resources = m?.[2] ?? ctx.resource;
  return busy(`ResourceQuota ${name} in namespace ${ctx.namespace} has not counted its ${resources} yet`, {
    hint:
      `Kubernetes' quota controller counts a custom resource once it has discovered its CRD, and a quota made ` +
      `before then at its next full resync (--resource-quota-sync-period, 5 minutes by default); ` +
      `\`kubectl get resourcequota ${name} -n ${ctx.namespace} -o jsonpath='{.status.used}'\` lists what it counts`,
    cause: err,
  });
}

/** Maps anything a call to the apiserver threw. */
export function gatewayError(e: unknown, ctx: CallContext): AppError {
  if (e instanceof AppError && !(e instanceof KubeApiError)) return e;
  const err =
    e instanceof KubeApiError ? e : toKubeError(e, `${ctx.verb} ${ctx.resource} in ${ctx.namespace}`);
  const what = `${ctx.verb} ${ctx.resource} in namespace ${ctx.namespace}`;
  switch (err.status) {
    case 0:
      return new AppError(
        'ENGINE_UNAVAILABLE',
        `the Kubernetes API server at ${ctx.server} is not answering (${err.message})`,
        { hint: unreachableHint(ctx.server), cause: err },
      );
    case 401:
      return new AppError('UNAUTHORIZED', `the Kubernetes API server refused the gateway's credentials`, {
        hint: 'check the token or client certificate in the kubeconfig the gateway uses (kubernetes.gateway.kubeconfig)',
        cause: err,
      });
    case 403:
      if (/exceeded quota/i.test(err.message)) return quotaExceeded(err, ctx);
      if (QUOTA_UNCOUNTED.test(err.message)) return quotaUncounted(err, ctx);
      return new AppError('FORBIDDEN', `the gateway may not ${what} (${err.message})`, {
        hint: rbacHint(ctx),
        cause: err,
      });
    case 404:
      return notFoundError(err, ctx, what);
    case 413:
      return new AppError(
        'TOO_LARGE',
        `the API server refused the SandboxRun as too large (${err.message})`,
        {
          hint: 'send less code, files or stdin: a Kubernetes object holds about 1 MiB',
          cause: err,
        },
      );
    default:
      if (err.code === 'ENGINE_UNAVAILABLE') {
        return new AppError(
          'ENGINE_UNAVAILABLE',
          `the Kubernetes API server failed to ${what}: ${err.message}`,
          {
            hint: unreachableHint(ctx.server),
            cause: err,
          },
        );
      }
      return new AppError('BACKEND_ERROR', `cannot ${what}: ${err.message}`, { cause: err });
  }
}

/** A 404: a missing namespace, a missing object, or a missing API (the CRD not installed). */
function notFoundError(err: KubeApiError, ctx: CallContext, what: string): AppError {
  const ns = NAMESPACE_MISSING.exec(err.message);
  if (ns) {
    return new AppError('CONFIG_INVALID', `namespace ${ns[1] ?? ctx.namespace} does not exist`, {
      hint: 'create it (`kubectl create namespace …`) or set kubernetes.gateway.namespace',
      cause: err,
    });
  }
  if (OBJECT_MISSING.test(err.message)) {
    return new AppError('NOT_FOUND', `cannot ${what}: ${err.message}`, { cause: err });
  }
  if (ctx.resource === 'sandboxruns' || ctx.resource === 'sandboxes') {
    const kind = ctx.resource === 'sandboxes' ? SANDBOX : SANDBOX_RUN;
    return new AppError(
      'ENGINE_UNAVAILABLE',
      `the ${kind.kind} API (${crdName(kind)}) is not installed in the cluster at ${ctx.server}`,
      { hint: CRD_HINT, cause: err },
    );
  }
  return new AppError('NOT_FOUND', `cannot ${what}: ${err.message}`, { cause: err });
}
