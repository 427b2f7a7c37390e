/**
 * The files runs returned on Kubernetes (RunFiles), for every gateway replica and a restarted one:
 * read from the ConfigMap the operator keeps them in (api/v1alpha1/run-files.ts), for the run's
 * owner only, for as long as the SandboxRun exists (its TTL removes both). Only a path the run's
 * status lists is read, by its index in the ConfigMap's manifest.
 */
import { RUN_FILES_MANIFEST, RunFilesManifestSchema, runFilesName } from '../../api/v1alpha1/run-files.js';
import { SandboxRunStatusSchema } from '../../api/v1alpha1/sandboxrun.js';
import { AppError } from '../../shared/errors.js';
import type { RunFiles, RunOwner } from '../types.js';
import type { RunApi } from './run-api.js';
import { findOwnedRun } from './run-records.js';

export function createRunFiles(o: { api: RunApi; namespace: string }): RunFiles {
  return {
    async read(runId: string, path: string, owner: RunOwner): Promise<Buffer> {
      const found = await findOwnedRun(o, runId, owner);
      const status = SandboxRunStatusSchema.safeParse(found?.run.status ?? {});
      const listed = status.success && status.data.outputs?.files.some((f) => f.path === path);
      if (!found || !listed) throw missing(runId, path);
      const { name, uid = '' } = found.run.metadata;
      const map = await o.api.getConfigMap({ namespace: found.ref.namespace, name: runFilesName(name, uid) });
      const manifest = RunFilesManifestSchema.safeParse(safeJson(map?.data?.[RUN_FILES_MANIFEST]));
      const index = manifest.success ? manifest.data.indexOf(path) : -1;
      const data = index >= 0 ? map?.binaryData?.[String(index)] : undefined;
      if (data === undefined) throw missing(runId, path);
      return Buffer.from(data, 'base64');
    },
    // The SandboxRun's TTL removes the ConfigMap with it (owner reference).
    release: () => undefined,
  };
}

function safeJson(text: string | undefined): unknown {
  try {
    return text === undefined ? undefined : (JSON.parse(text) as unknown);
  } catch {
    return undefined;
  }
}

function missing(runId: string, path: string): AppError {
  return new AppError('NOT_FOUND', `run ${runId} returned no file ${JSON.stringify(path)}`, {
    hint: 'the files a run returned are listed in its result (outputs.files); they go with the run (its TTL)',
  });
}
