/**
 * buildSessionPod(): the pod one Sandbox lives in: the hardened sandbox pod
 * (pod/build-sandbox-pod.ts) whose container runs the session runner on its attached stdin
 * (`stdin: true, stdinOnce: false`, so a restarted gateway can attach again), until
 * activeDeadlineSeconds (the session's TTL plus the start grace). The runner waits the whole TTL
 * for someone to open it: a Sandbox made with kubectl stays up for kubectl exec. With
 * `requireNoNetwork` (a cluster not declared to enforce NetworkPolicy) the runner first refuses a
 * sandbox that has any interface but lo (`--no-network`). Pure.
 */
import type { Pod } from '../../kube/objects.js';
import type { EffectiveSessionSpec } from '../../policy/session.js';
import { RUNNER_PATH } from '../../runner/protocol.js';
import type { ObjectRef } from '../children.js';
import { buildSandboxPod, type PodSettings } from '../pod/build-sandbox-pod.js';
import { sessionChildMeta } from './sandbox-ref.js';

export function buildSessionPod(
  sandbox: ObjectRef,
  spec: EffectiveSessionSpec,
  settings: PodSettings,
  options: { requireNoNetwork: boolean },
): Pod {
  return buildSandboxPod({
    meta: sessionChildMeta(sandbox),
    spec,
    settings,
    program: {
      command: [
        RUNNER_PATH,
        '--session',
        '--open-within',
        String(spec.ttlSeconds),
        ...(options.requireNoNetwork ? ['--no-network'] : []),
      ],
      stdin: true,
      env: spec.env,
    },
    activeDeadlineSeconds: spec.ttlSeconds + settings.startGraceSeconds,
  });
}
