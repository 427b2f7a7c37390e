/**
 * Which pool may serve a run or a session, on either backend: sandboxes are interchangeable only
 * when the runner's mode, the image, the runtime, every limit baked into the container or pod, and
 * whether it has a way to the egress proxy match exactly, so a run never gets looser or tighter limits than it asked for, and never a
 * session's sandbox (whose stdin outlives its attach). There is no best fit. Pure.
 */
import type { EffectiveSpec } from './evaluate.js';

/** How a sandbox's runner serves: one job (`run`), or a stream of requests (`session`). */
export type RunnerMode = 'run' | 'session';

type ShapeLimits = Pick<
  EffectiveSpec['limits'],
  'cpuMilli' | 'memoryBytes' | 'pids' | 'workspaceBytes' | 'tmpBytes' | 'fileSizeBytes' | 'openFiles'
>;

/**
 * What a sandbox is made of: the image, the runtime, the limits, and whether it is made with a way
 * to the egress proxy (never the job itself, nor its allowlist, which a claim binds).
 */
export type SandboxShape = Pick<EffectiveSpec, 'image' | 'runtime' | 'template' | 'workdir'> & {
  limits: ShapeLimits;
  network: Pick<EffectiveSpec['network'], 'egress'>;
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
    // Only egress sandboxes add to the key, so the keys (and pool label hashes) of the others stay.
    ...(shape.network.egress === 'none' ? [] : [shape.network.egress]),
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
    network: { egress: shape.network.egress },
  };
}
