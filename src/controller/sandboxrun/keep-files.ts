/**
 * keepRunFiles(): once a run's pod has finished, what its result says of the files it asked for
 * (spec.outputs), those it returned kept first in the ConfigMap the run owns
 * (build-files-config-map.ts), where a gateway replica, or a restarted one, reads them. A
 * ConfigMap of that name that the run does not own keeps nothing, and the result says so.
 */
import type { RunOutputs } from '../../api/outputs.js';
import type { KubeClient } from '../../kube/client.js';
import { isAlreadyExists } from '../../kube/errors.js';
import type { EffectiveOutputs } from '../../policy/evaluate.js';
import { runOutputsOf } from '../../runner/run-outputs.js';
import { isControlledBy, type ObjectRef } from '../children.js';
import { isPodFinished } from '../pod/observe-pod.js';
import { buildFilesConfigMap } from './build-files-config-map.js';
import type { Observed } from './run-children.js';

export async function keepRunFiles(
  kube: Pick<KubeClient, 'createConfigMap' | 'getConfigMap'>,
  run: ObjectRef,
  asked: EffectiveOutputs | undefined,
  observed: Observed,
): Promise<RunOutputs | undefined> {
  if (!asked || !observed.pod || !isPodFinished(observed.pod)) return undefined;
  const returned = observed.files;
  if (!returned || returned.files.length === 0) return runOutputsOf(asked, returned);
  const want = buildFilesConfigMap(run, returned.files);
  const name = want.metadata?.name ?? '';
  try {
    await kube.createConfigMap(run.namespace, want);
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
    const have = await kube.getConfigMap(run.namespace, name);
    if (!have || !isControlledBy(have, run)) {
      const message = `ConfigMap ${name} exists and is not this run's: its files are not kept`;
      const skipped = returned.files.map((f) => ({ entry: f.path, reason: 'Unreadable' as const, message }));
      return runOutputsOf(asked, { files: [], skipped: [...skipped, ...returned.skipped] });
    }
  }
  return runOutputsOf(asked, returned);
}
