/**
 * Which pool may serve a run or a session, on either backend: sandboxes are interchangeable only
 * when the runner's mode, the image, the runtime and every limit baked into the container or pod
 * match exactly, so a run never gets looser or tighter limits than it asked for, and never a
 * session's sandbox (whose stdin outlives its attach). There is no best fit. Pure.
 */
import type { EffectiveSpec } from './evaluate.js';

/** How a sandbox's runner serves: one job (`run`), or a stream of requests (`session`). */
export type RunnerMode = 'run' | 'session';

type ShapeLimits = Pick<
  EffectiveSpec['limits'],
  'cpuMilli' | 'memoryBytes' | 'pids' | 'workspaceBytes' | 'tmpBytes' | 'fileSizeBytes' | 'openFiles'
>;

/** What a sandbox is made of: the image, the runtime and the limits (never the job itself). */
export type SandboxShape = Pick<EffectiveSpec, 'image' | 'runtime' | 'template' | 'workdir'> & {
  limits: ShapeLimits;
};

export function poolKey(shape: SandboxShape, mode: RunnerMode = 'run'): string {
  const l = shape.limits;
  return JSON.stringify([
    mode,
    shape.template ?? '',
    shape.image,
    shape.runtime ?? '',
    shape.workdir,
    l.cpuMilli,
    l.memoryBytes,
    l.pids,
    l.workspaceBytes,
    l.tmpBytes,
    l.fileSizeBytes,
    l.openFiles,
  ]);
}

/** Only what the sandbox is built from: a pool keeps its own copy, free of any run's data. */
export function shapeOf(shape: SandboxShape): SandboxShape {
  return {
    template: shape.template,
    image: shape.image,
    runtime: shape.runtime,
    workdir: shape.workdir,
    limits: {
      cpuMilli: shape.limits.cpuMilli,
      memoryBytes: shape.limits.memoryBytes,
      pids: shape.limits.pids,
      workspaceBytes: shape.limits.workspaceBytes,
      tmpBytes: shape.limits.tmpBytes,
      fileSizeBytes: shape.limits.fileSizeBytes,
      openFiles: shape.limits.openFiles,
    },
  };
}
