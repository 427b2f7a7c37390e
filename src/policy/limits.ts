/**
 * The limits a run gets: what it asks for, else the template's default, else the ceiling; never
 * more than the ceiling (a request over it is a violation naming both). Pure.
 */
import type { EffectiveLimits, RunRequest } from '../api/run.js';
import { formatCpu, formatSize, parseCpu, parseSize } from '../shared/quantity.js';
import type { Decision } from './decision.js';
import type { Template } from './templates.js';

export const OPEN_FILES = 1024;

interface Bound {
  fallback: number;
  ceiling: number;
  show: (n: number) => string;
}

export function resolveLimits(
  request: Pick<RunRequest, 'resources' | 'timeoutSeconds'>,
  template: Template | undefined,
  d: Decision,
): EffectiveLimits {
  const c = d.policy.ceilings;
  const t = template?.defaults ?? {};
  const r = request.resources ?? {};
  const pick = (field: string, asked: number | undefined, bound: Bound): number => {
    if (asked === undefined) return Math.min(bound.fallback, bound.ceiling);
    if (asked > bound.ceiling) {
      d.deny({
        field,
        message: `${bound.show(asked)} is over the ceiling of ${bound.show(bound.ceiling)}`,
        limit: bound.show(bound.ceiling),
        requested: bound.show(asked),
      });
    }
    return Math.min(asked, bound.ceiling);
  };
  const asSize = (v: string | number | undefined) => (v === undefined ? undefined : parseSize(v));
  const size = (fallback: number, ceiling: number): Bound => ({ fallback, ceiling, show: formatSize });
  const memoryBytes = pick(
    'resources.memory',
    asSize(r.memory),
    size(t.memoryBytes ?? c.memoryBytes, c.memoryBytes),
  );
  const workspaceBytes = pick(
    'resources.ephemeralStorage',
    asSize(r.ephemeralStorage),
    size(c.workspaceBytes, c.workspaceBytes),
  );
  return {
    cpuMilli: pick('resources.cpu', r.cpu === undefined ? undefined : parseCpu(r.cpu), {
      fallback: c.cpuMilli,
      ceiling: c.cpuMilli,
      show: formatCpu,
    }),
    memoryBytes,
    pids: pick('resources.pids', r.pids, { fallback: t.pids ?? c.pids, ceiling: c.pids, show: String }),
    workspaceBytes,
    tmpBytes: c.tmpBytes,
    timeoutSeconds: pick('timeoutSeconds', request.timeoutSeconds, {
      fallback: t.timeoutSeconds ?? c.timeoutSeconds,
      ceiling: c.timeoutSeconds,
      show: (n) => `${n}s`,
    }),
    outputBytes: c.outputBytes,
    fileSizeBytes: Math.max(workspaceBytes, c.tmpBytes),
    openFiles: OPEN_FILES,
  };
}
