/**
 * buildConfigMap(): the run's inputs (argv, env, files, code, stdin, deadline) as one framed job in
 * an immutable ConfigMap the pod mounts read-only. Pure.
 */
import type { ConfigMap } from '../../kube/objects.js';
import type { ObjectRef } from '../children.js';
import { JOB_KEY } from './build-run-pod.js';
import { runChildMeta } from './run-ref.js';

/** A ConfigMap holds at most 1 MiB; leave room for its metadata. */
export const MAX_JOB_BYTES = 1024 * 1024 - 16 * 1024;

export function buildConfigMap(run: ObjectRef, job: Buffer): ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: runChildMeta(run),
    immutable: true,
    binaryData: { [JOB_KEY]: job.toString('base64') },
  };
}
