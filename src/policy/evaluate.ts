/**
 * `evaluate(request, policy)`: the one decision every backend renders. Pure: no I/O, no clock.
 * It returns the effective spec, or every violation at once, each naming its field and limit.
 * Its parts: the template, image and runtime here; limits.ts, sizes.ts and network.ts.
 */
import { DEFAULT_OUTPUT_CAPS, refusedEntry, type OutputCaps, type OutputSkip } from '../api/outputs.js';
import type { EffectiveNetwork } from '../api/egress.js';
import type { EffectiveLimits, RunRequest } from '../api/run.js';
import type { Violation } from '../shared/errors.js';
import type { Decision, Scope } from './decision.js';
import { imageAllowed, normaliseImage } from './images.js';
import { resolveLimits } from './limits.js';
import { checkNetwork } from './network.js';
import type { Policy } from './policy.js';
import { checkSizes } from './sizes.js';
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
  network: EffectiveNetwork;
  runtime: string | undefined;
  workdir: string;
  outputs: EffectiveOutputs;
}

/** The files a run collects once its program exits. */
export interface EffectiveOutputs {
  /** Workspace paths or globs the runner collects (none: nothing is collected). */
  entries: string[];
  /** Entries that can never be in the workspace (absolute, `..`): not sent, named in the result. */
  refused: OutputSkip[];
  caps: OutputCaps;
}

/** A run that collects nothing. */
export const NO_OUTPUTS: EffectiveOutputs = { entries: [], refused: [], caps: DEFAULT_OUTPUT_CAPS };

export type Evaluation = { ok: true; spec: EffectiveSpec } | { ok: false; violations: Violation[] };

/** What every sandbox, a run's or a session's, is decided on. */
export type SandboxRequest = Pick<
  RunRequest,
  'template' | 'image' | 'resources' | 'timeoutSeconds' | 'runtime' | 'network'
>;

export interface SandboxDecision {
  template: Template | undefined;
  image: string | undefined;
  limits: EffectiveLimits;
  runtime: string | undefined;
  network: EffectiveNetwork;
}

/** The sandbox a request gets: template, image, limits, runtime and network, each against the policy. */
export function resolveSandbox(request: SandboxRequest, d: Decision): SandboxDecision {
  const template = resolveTemplate(request, d);
  return {
    template,
    image: resolveImage(request, template, d),
    limits: resolveLimits(request, template, d),
    runtime: resolveRuntime(request, d),
    network: checkNetwork(request, d),
  };
}

export function evaluate(request: RunRequest, policy: Policy, scope: Scope = {}): Evaluation {
  const violations: Violation[] = [];
  const d: Decision = { policy, scope, deny: (v) => void violations.push(v) };
  const { template, image, limits, runtime, network } = resolveSandbox(request, d);

  const files = request.files.map((f) => ({
    path: f.path,
    content: Buffer.from(f.content, f.encoding),
    executable: f.executable,
  }));
  const code = request.code === undefined ? undefined : Buffer.from(request.code, 'utf8');
  const stdin = Buffer.from(request.stdin ?? '', 'utf8');
  checkSizes(request, { files, code, stdin }, limits, d);

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
      network,
      runtime,
      workdir: WORKSPACE,
      outputs: outputsOf(request, template, policy),
    },
  };
}

/** The request's outputs, else its template's default. */
function outputsOf(request: RunRequest, template: Template | undefined, policy: Policy): EffectiveOutputs {
  return resolveOutputs(request.outputs ?? template?.outputs ?? [], policy.ceilings.outputs);
}

/** The entries a run collects, each once, with those that can never be in the workspace set apart. */
export function resolveOutputs(entries: readonly string[], caps: OutputCaps): EffectiveOutputs {
  const unique = [...new Set(entries)];
  const refused = unique.flatMap((e) => refusedEntry(e) ?? []);
  return {
    entries: unique.filter((e) => refusedEntry(e) === undefined),
    refused,
    caps: { ...caps },
  };
}

function resolveTemplate(
  request: Pick<RunRequest, 'template'>,
  { policy, scope, deny }: Decision,
): Template | undefined {
  if (request.template === undefined) {
    if (scope.templates) {
      deny({
        field: 'template',
        message: 'this token runs only its templates: name one of them',
        limit: scope.templates.join(', ') || '(none)',
      });
    }
    return undefined;
  }
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
  request: Pick<RunRequest, 'image'>,
  template: Template | undefined,
  { policy, scope, deny }: Decision,
): string | undefined {
  const ref = request.image ?? template?.image;
  if (ref === undefined) return undefined;
  const image = normaliseImage(ref);
  if (!image) {
    deny({ field: 'image', message: `"${ref}" is not a valid image reference` });
    return undefined;
  }
  // A template outside the token's scope is refused already; its image needs no second word.
  const scoped = templateInScope(template, scope) ? scopedImages(policy, scope) : undefined;
  if (!imageAllowed(image, policy.imageAllowlist)) {
    deny({
      field: 'image',
      message: `image "${ref}" is not in the allowlist`,
      limit: policy.imageAllowlist.join(', '),
    });
  } else if (scoped && !imageAllowed(image, scoped)) {
    deny({
      field: 'image',
      message: `image "${ref}" is not allowed for this token`,
      limit: scoped.join(', ') || '(none)',
    });
  }
  return image;
}

function templateInScope(template: Template | undefined, scope: Scope): boolean {
  return !scope.templates || (template !== undefined && scope.templates.includes(template.name));
}

/**
 * The images a token may use, within the allowlist: its templates' own images, widened by its
 * `images` when it names some; only its `images` when it has no template scope; any when neither.
 */
function scopedImages(policy: Policy, scope: Scope): readonly string[] | undefined {
  if (!scope.templates) return scope.images;
  const own = policy.templates.filter((t) => scope.templates?.includes(t.name)).map((t) => t.image);
  return [...own, ...(scope.images ?? [])];
}

function resolveRuntime(
  request: Pick<RunRequest, 'runtime'>,
  { policy, deny }: Decision,
): string | undefined {
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

/** Template defaults first, the request's variables last (they win). */
export function mergeEnv(
  defaults: Readonly<Record<string, string>>,
  env: RunRequest['env'],
): { name: string; value: string }[] {
  const merged = new Map<string, string>(Object.entries(defaults));
  for (const e of env) merged.set(e.name, e.value);
  return [...merged].map(([name, value]) => ({ name, value }));
}
