/**
 * buildConfigMap(): the run's inputs (argv, env, files, code, stdin, deadline) as one framed job in
 * an immutable ConfigMap the pod mounts read-only. Pure.
 */
import type { ConfigMap } from '../kube/objects.js';
import { JOB_KEY } from './build-pod.js';
import { childMeta, type RunRef } from './children.js';

/** A ConfigMap holds at most 1 MiB; leave room for its metadata. */
export const MAX_JOB_BYTES = 1024 * 1024 - 16 * 1024;

export function buildConfigMap(run: RunRef, job: Buffer): ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: childMeta(run),
    immutable: true,
    binaryData: { [JOB_KEY]: job.toString('base64') },
  };
}
