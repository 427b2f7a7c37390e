/** What list_templates shows: the templates a principal may use, with the limits a run gets by default. Pure. */
import type { Policy } from '../policy/policy.js';
import { formatCpu, formatSize } from '../shared/quantity.js';
import type { Principal } from './principal.js';

export interface TemplateInfo {
  name: string;
  description: string;
  image: string;
  libraries: string[];
  aliases: string[];
  fileName: string;
  defaults: { cpu: string; memory: string; timeoutSeconds: number; pids: number };
}

export function templatesFor(policy: Policy, principal: Principal): TemplateInfo[] {
  const allowed = principal.scope.templates;
  const c = policy.ceilings;
  return policy.templates
    .filter((t) => !allowed || allowed.includes(t.name))
    .map((t) => ({
      name: t.name,
      description: t.description,
      image: t.image,
      libraries: [...t.libraries],
      aliases: [...t.aliases],
      fileName: t.fileName,
      defaults: {
        cpu: formatCpu(c.cpuMilli),
        memory: formatSize(Math.min(t.defaults.memoryBytes ?? Infinity, c.memoryBytes)),
        timeoutSeconds: Math.min(t.defaults.timeoutSeconds ?? Infinity, c.timeoutSeconds),
        pids: Math.min(t.defaults.pids ?? Infinity, c.pids),
      },
    }));
}
