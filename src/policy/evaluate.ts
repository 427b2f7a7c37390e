/**
 * `evaluate(request, policy)`: the one decision every backend renders. Pure: no I/O, no clock.
 * It returns the effective spec, or every violation at once, each naming its field and limit.
 */
import type { EffectiveLimits, RunRequest } from '../api/run.js';
import type { Violation } from '../shared/errors.js';
import { formatCpu, formatSize, parseCpu, parseSize } from '../shared/quantity.js';
import { imageAllowed, normaliseImage } from './images.js';
import type { Policy } from './policy.js';
import type { Template } from './templates.js';
import { CODE_DIR, findTemplate, WORKSPACE } from './templates.js';

export interface EffectiveFile {
  path: string;
  content: Buffer;
  executable: boolean;
}

export interface EffectiveSpec {
  template: string | undefined;
  image: string;
  argv: string[];
  /** The code, exposed read-only to the program at `codePath`. */
  code: { path: string; content: Buffer } | undefined;
  files: EffectiveFile[];
  stdin: Buffer;
  env: { name: string; value: string }[];
  limits: EffectiveLimits;
  network: 'none';
  runtime: string | undefined;
  workdir: string;
}

/** What a caller's credentials narrow the policy to (token scopes). */
export interface Scope {
  templates?: readonly string[];
  images?: readonly string[];
}

export type Evaluation = { ok: true; spec: EffectiveSpec } | { ok: false; violations: Violation[] };

export const OPEN_FILES = 1024;

export function evaluate(request: RunRequest, policy: Policy, scope: Scope = {}): Evaluation {
  const violations: Violation[] = [];
  const deny = (v: Violation): void => void violations.push(v);

  const template = resolveTemplate(request, policy, scope, deny);
  const image = resolveImage(request, template, policy, scope, deny);
  const limits = resolveLimits(request, template, policy, deny);
  const runtime = resolveRuntime(request, policy, deny);
  checkNetwork(request, deny);

  const files = request.files.map((f) => ({
    path: f.path,
    content: Buffer.from(f.content, f.encoding),
    executable: f.executable,
  }));
  const code = request.code === undefined ? undefined : Buffer.from(request.code, 'utf8');
  const stdin = Buffer.from(request.stdin ?? '', 'utf8');
  checkSizes(request, { files, code, stdin }, policy, limits, deny);

  if (violations.length > 0 || !image) return { ok: false, violations };

  const codePath = template ? `${CODE_DIR}/${template.fileName}` : undefined;
  return {
    ok: true,
    spec: {
      template: template?.name,
      image,
      argv: request.command ? [...request.command] : [...(template?.command ?? [])],
      code: code && codePath ? { path: codePath, content: code } : undefined,
      files,
      stdin,
      env: mergeEnv(template?.env ?? {}, request.env),
      limits,
      network: 'none',
      runtime,
      workdir: WORKSPACE,
    },
  };
}

type Deny = (v: Violation) => void;

function resolveTemplate(
  request: RunRequest,
  policy: Policy,
  scope: Scope,
  deny: Deny,
): Template | undefined {
  if (request.template === undefined) return undefined;
  const template = findTemplate(policy.templates, request.template);
  if (!template) {
    deny({
      field: 'template',
      message: `unknown template "${request.template}"`,
      limit: policy.templates.map((t) => t.name).join(', '),
    });
    return undefined;
  }
  if (scope.templates && !scope.templates.includes(template.name)) {
    deny({
      field: 'template',
      message: `template "${template.name}" is not allowed for this token`,
      limit: scope.templates.join(', '),
    });
  }
  return template;
}

function resolveImage(
  request: RunRequest,
  template: Template | undefined,
  policy: Policy,
  scope: Scope,
  deny: Deny,
): string | undefined {
  const ref = request.image ?? template?.image;
  if (ref === undefined) return undefined;
  const image = normaliseImage(ref);
  if (!image) {
    deny({ field: 'image', message: `"${ref}" is not a valid image reference` });
    return undefined;
  }
  if (!imageAllowed(image, policy.imageAllowlist)) {
    deny({
      field: 'image',
      message: `image "${ref}" is not in the allowlist`,
      limit: policy.imageAllowlist.join(', '),
    });
  } else if (scope.images && !imageAllowed(image, scope.images)) {
    deny({
      field: 'image',
      message: `image "${ref}" is not allowed for this token`,
      limit: scope.images.join(', '),
    });
  }
  return image;
}

function resolveLimits(
  request: RunRequest,
  template: Template | undefined,
  policy: Policy,
  deny: Deny,
): EffectiveLimits {
  const c = policy.ceilings;
  const d = template?.defaults ?? {};
  const r = request.resources ?? {};
  const pick = (
    field: string,
    asked: number | undefined,
    fallback: number,
    ceiling: number,
    show: (n: number) => string,
  ) => {
    if (asked === undefined) return Math.min(fallback, ceiling);
    if (asked > ceiling) {
      deny({
        field,
        message: `${show(asked)} is over the ceiling of ${show(ceiling)}`,
        limit: show(ceiling),
        requested: show(asked),
      });
    }
    return Math.min(asked, ceiling);
  };
  const asSize = (v: string | number | undefined) => (v === undefined ? undefined : parseSize(v));
  const memoryBytes = pick(
    'resources.memory',
    asSize(r.memory),
    d.memoryBytes ?? c.memoryBytes,
    c.memoryBytes,
    formatSize,
  );
  const workspaceBytes = pick(
    'resources.ephemeralStorage',
    asSize(r.ephemeralStorage),
    c.workspaceBytes,
    c.workspaceBytes,
    formatSize,
  );
  return {
    cpuMilli: pick(
      'resources.cpu',
      r.cpu === undefined ? undefined : parseCpu(r.cpu),
      c.cpuMilli,
      c.cpuMilli,
      formatCpu,
    ),
    memoryBytes,
    pids: pick('resources.pids', r.pids, d.pids ?? c.pids, c.pids, String),
    workspaceBytes,
    tmpBytes: c.tmpBytes,
    timeoutSeconds: pick(
      'timeoutSeconds',
      request.timeoutSeconds,
      d.timeoutSeconds ?? c.timeoutSeconds,
      c.timeoutSeconds,
      (n) => `${n}s`,
    ),
    outputBytes: c.outputBytes,
    fileSizeBytes: Math.max(workspaceBytes, c.tmpBytes),
    openFiles: OPEN_FILES,
  };
}

function resolveRuntime(request: RunRequest, policy: Policy, deny: Deny): string | undefined {
  const runtime = request.runtime ?? policy.defaultRuntime;
  if (request.runtime !== undefined && !policy.allowedRuntimes.includes(request.runtime)) {
    deny({
      field: 'runtime',
      message: `runtime "${request.runtime}" is not allowed`,
      limit: policy.allowedRuntimes.join(', ') || '(the default only)',
    });
  }
  return runtime;
}

function checkNetwork(request: RunRequest, deny: Deny): void {
  const egress = request.network?.egress ?? 'none';
  if (egress !== 'none') {
    deny({
      field: 'network.egress',
      message: `egress "${egress}" is not available: sandboxes have no network (egress rules are not implemented)`,
      limit: 'none',
      requested: egress,
    });
  }
}

function checkSizes(
  request: RunRequest,
  input: { files: EffectiveFile[]; code: Buffer | undefined; stdin: Buffer },
  policy: Policy,
  limits: EffectiveLimits,
  deny: Deny,
): void {
  const c = policy.ceilings;
  if (request.files.length > c.files) {
    deny({
      field: 'files',
      message: `${request.files.length} files is over the limit of ${c.files}`,
      limit: c.files,
    });
  }
  if (request.env.length > c.envVars) {
    deny({
      field: 'env',
      message: `${request.env.length} variables is over the limit of ${c.envVars}`,
      limit: c.envVars,
    });
  }
  const fileBytes = input.files.reduce((n, f) => n + f.content.length, 0);
  if (fileBytes > limits.workspaceBytes) {
    deny({
      field: 'files',
      message: `files total ${formatSize(fileBytes)}, more than the workspace holds (${formatSize(limits.workspaceBytes)})`,
      limit: formatSize(limits.workspaceBytes),
    });
  }
  const argvBytes = (request.command ?? []).reduce((n, a) => n + Buffer.byteLength(a) + 1, 0);
  const envBytes = request.env.reduce(
    (n, e) => n + Buffer.byteLength(e.name) + Buffer.byteLength(e.value) + 2,
    0,
  );
  const total = fileBytes + (input.code?.length ?? 0) + input.stdin.length + argvBytes + envBytes;
  if (total > c.requestBytes) {
    deny({
      field: 'request',
      message: `code, files, stdin, argv and env total ${formatSize(total)}, over the limit of ${formatSize(c.requestBytes)}`,
      limit: formatSize(c.requestBytes),
      requested: formatSize(total),
    });
  }
}

/** Template defaults first, the request's variables last (they win). */
function mergeEnv(
  defaults: Readonly<Record<string, string>>,
  env: RunRequest['env'],
): { name: string; value: string }[] {
  const merged = new Map<string, string>(Object.entries(defaults));
  for (const e of env) merged.set(e.name, e.value);
  return [...merged].map(([name, value]) => ({ name, value }));
}
