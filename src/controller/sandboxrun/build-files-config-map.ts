/**
 * buildFilesConfigMap(): the ConfigMap that keeps the files a run returned (api/v1alpha1/run-files.ts),
 * owned by the run so that it goes with it. It does not carry the operator's managed-by label: its
 * informer, which holds every child it watches in memory, never holds files. Pure.
 */
import { LABEL_COMPONENT } from '../../api/v1alpha1/labels.js';
import { RUN_FILES_COMPONENT, RUN_FILES_MANIFEST, runFilesName } from '../../api/v1alpha1/run-files.js';
import type { ConfigMap } from '../../kube/objects.js';
import type { ReturnedFile } from '../../runner/output-files.js';
import { controllerRef, type ObjectRef } from '../children.js';
import { runPodLabels } from './run-ref.js';

export function buildFilesConfigMap(run: ObjectRef, files: readonly ReturnedFile[]): ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: runFilesName(run.name, run.uid),
      namespace: run.namespace,
      labels: { [LABEL_COMPONENT]: RUN_FILES_COMPONENT, ...runPodLabels(run) },
      ownerReferences: [controllerRef(run)],
    },
    immutable: true,
    data: { [RUN_FILES_MANIFEST]: JSON.stringify(files.map((f) => f.path)) },
    binaryData: Object.fromEntries(files.map((f, i) => [String(i), f.data.toString('base64')])),
  };
}
