/**
 * A SandboxRun's output files on Kubernetes (issue 18): the operator keeps the files a run
 * returned in one ConfigMap the run owns, `<child name>-files`, so that any gateway replica (or a
 * restarted one) reads them for as long as the run exists. Its binaryData holds each file under
 * its index ("0", "1", …) and its data the paths, in that order, as JSON (`files.json`): never a
 * key the sandbox chose. A ConfigMap holds 1 MiB: what a run returns is capped below that, and a
 * file past the cap is named in the run's outputs with it.
 */
import * as z from 'zod';
import { childName } from './labels.js';

/** The bytes of files a run returns on Kubernetes: a ConfigMap's 1 MiB, less room for the rest. */
export const MAX_RUN_FILES_BYTES = 960 * 1024;

export const RUN_FILES_MANIFEST = 'files.json';

/** The value of `sandpit.dev/component` on a run's files ConfigMap (the operator's informer does not hold it). */
export const RUN_FILES_COMPONENT = 'run-files';

export const RunFilesManifestSchema = z.array(z.string()).max(1024);

export function runFilesName(runName: string, uid: string): string {
  return `${childName(runName, uid)}-files`;
}
