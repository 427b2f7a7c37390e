/**
 * buildSessionPod(): the pod one Sandbox lives in: the hardened sandbox pod
 * (pod/build-sandbox-pod.ts) whose container runs the session runner on its attached stdin
 * (`stdin: true, stdinOnce: false`, so a restarted gateway can attach again). With
 * `requireNoNetwork` (a cluster not declared to enforce NetworkPolicy) the runner first refuses a
 * sandbox that has any interface but lo (`--no-network`). Pure.
 *
 * A session's TTL can be extended (PATCH /sessions/:id changes spec.ttlSeconds), but a pod's
 * activeDeadlineSeconds can never be raised, and its command never changes. So the pod carries
 * only the policy's TTL ceiling (`maxTtlSeconds`, which no extension can pass): its
 * activeDeadlineSeconds is the ceiling plus the start grace, the kubelet's backstop should the
 * operator be gone, and the runner waits up to the ceiling for someone to open it (a Sandbox made
 * with kubectl stays up for kubectl exec). The session's exact TTL is enforced by the operator
 * (status.expiresAt, recomputed from spec.ttlSeconds) and by the runner of an opened session.
 */
import type { Container, Pod } from '../../kube/objects.js';
import type { EffectiveSessionSpec } from '../../policy/session.js';
import { RUNNER_PATH } from '../../runner/protocol.js';
import type { ObjectRef } from '../children.js';
import { buildSandboxPod, type PodSettings, type SandboxProgram } from '../pod/build-sandbox-pod.js';
import { egressPodEnv } from '../pod/egress.js';
import { sessionChildMeta } from './sandbox-ref.js';

export function buildSessionPod(
  sandbox: ObjectRef,
  spec: EffectiveSessionSpec,
  settings: PodSettings,
  options: { requireNoNetwork: boolean; maxTtlSeconds: number },
): Pod {
  const meta = sessionChildMeta(sandbox);
  return buildSandboxPod({
    meta,
    spec,
    settings,
    program: sessionProgram({
      openWithinSeconds: options.maxTtlSeconds,
      requireNoNetwork: options.requireNoNetwork,
      // With an allowlist, the proxy variables from the session's Secret (same name as the pod),
      // which the gateway's open has the runner pass on to every exec.
      env: [...spec.env, ...egressPodEnv(spec.network, meta.name ?? '')],
    }),
    activeDeadlineSeconds: options.maxTtlSeconds + settings.startGraceSeconds,
  });
}

/**
 * The session runner on its attached stdin (`stdinOnce: false`), waiting up to `openWithinSeconds`
 * for someone to open the session: a Sandbox's pod, and a session pool's (which has no env).
 */
export function sessionProgram(o: {
  openWithinSeconds: number;
  requireNoNetwork: boolean;
  env?: NonNullable<Container['env']>;
}): SandboxProgram {
  return {
    command: [
      RUNNER_PATH,
      '--session',
      '--open-within',
      String(o.openWithinSeconds),
      ...(o.requireNoNetwork ? ['--no-network'] : []),
    ],
    stdin: true,
    ...(o.env ? { env: o.env } : {}),
  };
}
