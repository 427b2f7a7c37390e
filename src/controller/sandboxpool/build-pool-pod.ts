/**
 * buildPoolPod(): one ready pod of a SandboxPool: the hardened sandbox pod (pod/build-sandbox-pod.ts)
 * of the pool's effective shape, labelled as the pool's (idle, its shape) and controlled by it.
 * Pure.
 * - mode `run`: the runner's pool mode (`sandpit-runner --pool`) reads one job from its attached
 *   stdin, which closes when that attach ends (`stdinOnce: true`).
 * - mode `session`: the session runner as a Sandbox's pod has it, with the pool's variables (its
 *   template's) in the container's environment.
 * Its activeDeadlineSeconds covers its idle life and the longest thing it may then serve (the
 * run timeout or the session TTL ceiling), plus the start grace: the kubelet's backstop. A claim
 * lowers it to the claimed run's own deadline.
 */
import type { PoolMode } from '../../api/v1alpha1/sandboxpool.js';
import type { Pod } from '../../kube/objects.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { Policy } from '../../policy/policy.js';
import { preloadFlags, RUNNER_PATH } from '../../runner/protocol.js';
import type { ObjectRef } from '../children.js';
import { buildSandboxPod, type PodSettings, type SandboxProgram } from '../pod/build-sandbox-pod.js';
import { sessionProgram } from '../sandbox/build-session-pod.js';
import { poolPodMeta } from './pool-ref.js';
import { EGRESS_PROXY_ADDRESS_VAR, proxyAddress, type ClusterEgress } from '../pod/egress.js';

export interface PoolShape {
  mode: PoolMode;
  maxIdleSeconds: number;
  effective: EffectiveSpec;
  shapeLabel: string;
}

export interface PoolPodOptions {
  settings: PodSettings;
  ceilings: Pick<Policy, 'ceilings' | 'sessions'>;
  /** The cluster does not enforce NetworkPolicy: the session runner checks its interfaces first. */
  requireNoNetwork: boolean;
  /** The egress proxy, when the cluster runs one: the pods of an egress shape carry its address. */
  egress?: ClusterEgress | undefined;
}

/**
 * The command that makes a pod a pool pod of mode run (what a claim checks it is serving), then
 * the preloader's flags with the pool's variables.
 */
export const POOL_RUNNER_COMMAND: readonly string[] = [RUNNER_PATH, '--pool'];

function program(shape: PoolShape, o: PoolPodOptions): SandboxProgram {
  if (shape.mode === 'run') {
    // An egress shape's pod carries the proxy's address; the credential comes with a run's job.
    const egress = shape.effective.network.egress === 'allowlist' ? o.egress : undefined;
    return {
      command: [...POOL_RUNNER_COMMAND, ...preloadFlags(shape.effective.env)],
      stdin: true,
      stdinOnce: true,
      ...(egress ? { env: [{ name: EGRESS_PROXY_ADDRESS_VAR, value: proxyAddress(egress) }] } : {}),
    };
  }
  // The pool's variables are its template's: a Sandbox is served only when its own are those.
  // The runner waits for a session to open it through the pod's idle life and, once a Sandbox
  // made with kubectl claims it, the session's whole life (a gateway opens it at once).
  return sessionProgram({
    openWithinSeconds: shape.maxIdleSeconds + o.ceilings.sessions.maxTtlSeconds,
    requireNoNetwork: o.requireNoNetwork,
    env: shape.effective.env,
  });
}

/** How long the longest job a pool pod may serve lasts: a run's timeout or a session's TTL ceiling. */
export const servingCeilingSeconds = (mode: PoolMode, c: PoolPodOptions['ceilings']): number =>
  mode === 'run' ? c.ceilings.timeoutSeconds : c.sessions.maxTtlSeconds;

export function buildPoolPod(pool: ObjectRef, shape: PoolShape, o: PoolPodOptions): Pod {
  return buildSandboxPod({
    meta: poolPodMeta(pool, shape.shapeLabel),
    spec: shape.effective,
    settings: o.settings,
    program: program(shape, o),
    activeDeadlineSeconds:
      shape.maxIdleSeconds + servingCeilingSeconds(shape.mode, o.ceilings) + o.settings.startGraceSeconds,
  });
}
