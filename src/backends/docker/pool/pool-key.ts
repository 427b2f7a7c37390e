/**
 * Which pool may serve a run or a session: containers are interchangeable only when the runner's
 * mode, the image, the runtime and every limit baked into the container match exactly, so a run
 * never gets looser or tighter limits than it asked for, and never a session's container (whose
 * stdin outlives its attach).
 */
import type { ContainerShape, RunnerMode } from '../container-config.js';

export function poolKey(shape: ContainerShape, mode: RunnerMode = 'run'): string {
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

/** Only what the container is built from: a pool keeps its own copy, free of any run's data. */
export function shapeOf(shape: ContainerShape): ContainerShape {
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
