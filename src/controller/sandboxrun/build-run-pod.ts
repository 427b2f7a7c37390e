/**
 * buildRunPod(): the pod that runs one SandboxRun: the hardened sandbox pod
 * (pod/build-sandbox-pod.ts) whose container runs `sandpit-runner --plain` on the framed job from
 * the run's own ConfigMap, until activeDeadlineSeconds (the run's timeout plus the start grace).
 * Pure: the same run, decision and settings give the same Pod.
 */
import type { Pod } from '../../kube/objects.js';
import type { EffectiveSpec } from '../../policy/evaluate.js';
import type { ObjectRef } from '../children.js';
import { buildSandboxPod, type PodSettings } from '../pod/build-sandbox-pod.js';
import { egressPodEnv } from '../pod/egress.js';
import { runChildMeta } from './run-ref.js';
import { RUNNER_PATH } from '../../runner/protocol.js';

export const JOB_KEY = 'job.bin';
export const JOB_DIR = '/sandpit/job';

/**
 * The run's pod. With egress, its container gets the proxy variables from the run's Secret (same
 * name as the pod), which the job has the runner pass on to the program.
 */
export function buildRunPod(run: ObjectRef, spec: EffectiveSpec, settings: PodSettings): Pod {
  const meta = runChildMeta(run);
  return buildSandboxPod({
    meta,
    spec,
    settings,
    program: {
      command: [RUNNER_PATH, '--job', `${JOB_DIR}/${JOB_KEY}`, '--plain'],
      env: egressPodEnv(spec.network, meta.name ?? ''),
      inputs: [
        {
          mount: { name: 'job', mountPath: JOB_DIR },
          volume: {
            name: 'job',
            configMap: {
              name: meta.name ?? '',
              items: [{ key: JOB_KEY, path: JOB_KEY }],
              defaultMode: 0o444,
            },
          },
        },
      ],
    },
    activeDeadlineSeconds: spec.limits.timeoutSeconds + settings.startGraceSeconds,
  });
}
