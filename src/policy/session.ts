/**
 * What a session may have, and what each of its execs gets: the same decision as a run's
 * (template, image, runtime, limits, network, each against the same ceilings), plus the session's
 * lifetime, idle time and concurrent execs. Pure; every violation at once, each naming its field.
 */
import * as z from 'zod';
import { EffectiveNetworkSchema, type EffectiveNetwork } from '../api/egress.js';
import type { EffectiveLimits } from '../api/run.js';
import type { ExecRequest, SessionRequest } from '../api/session.js';
import { toWorkspacePath } from '../api/session.js';
import type { Violation } from '../shared/errors.js';
import type { Decision, Scope } from './decision.js';
import { mergeEnv, resolveSandbox } from './evaluate.js';
import type { Policy } from './policy.js';
import { WORKSPACE } from './templates.js';

export interface EnvPair {
  name: string;
  value: string;
}

export interface EffectiveSessionSpec {
  template: string | undefined;
  image: string;
  runtime: string | undefined;
  workdir: string;
  network: EffectiveNetwork;
  /** `timeoutSeconds` is the default deadline of each exec. */
  limits: EffectiveLimits;
  /** The template's variables and the request's. */
  env: EnvPair[];
  /** Variables whose values are never shown, logged or audited. */
  secrets: EnvPair[];
  ttlSeconds: number;
  idleTimeoutSeconds: number;
  maxExecs: number;
}

/** A session's spec without its variables: what may be written down (audit, journal). */
export type SessionFacts = Omit<EffectiveSessionSpec, 'env' | 'secrets'>;

/** The spec as it comes back from storage (a runner's record, the journal): checked, never trusted. */
export const SessionFactsSchema = z.object({
  template: z.string().optional(),
  image: z.string(),
  runtime: z.string().optional(),
  workdir: z.string(),
  network: EffectiveNetworkSchema,
  limits: z.object({
    cpuMilli: z.number(),
    memoryBytes: z.number(),
    pids: z.number(),
    workspaceBytes: z.number(),
    tmpBytes: z.number(),
    timeoutSeconds: z.number(),
    outputBytes: z.number(),
    fileSizeBytes: z.number(),
    openFiles: z.number(),
  }),
  ttlSeconds: z.number(),
  idleTimeoutSeconds: z.number(),
  maxExecs: z.number(),
});

const EnvPairSchema = z.object({ name: z.string(), value: z.string() });
export const EffectiveSessionSpecSchema = SessionFactsSchema.extend({
  env: z.array(EnvPairSchema),
  secrets: z.array(EnvPairSchema),
});

export function factsOf(spec: EffectiveSessionSpec): SessionFacts {
  const { env: _env, secrets: _secrets, ...facts } = spec;
  return facts;
}

export interface EffectiveExec {
  argv: string[];
  /** The exec's own variables (the sandbox already holds the session's). */
  env: EnvPair[];
  /** Working directory relative to the workspace ('' for the workspace itself). */
  cwd: string;
  timeoutSeconds: number;
  stdin: Buffer;
  background: boolean;
  tty: boolean;
  outputBytes: number;
}

export type SessionEvaluation =
  { ok: true; spec: EffectiveSessionSpec } | { ok: false; violations: Violation[] };

export type ExecEvaluation = { ok: true; exec: EffectiveExec } | { ok: false; violations: Violation[] };

/** What the backend itself cannot do (Kubernetes knows activity only to ±10 s: no idle timeout under 60 s). */
export interface BackendFloors {
  minIdleTimeoutSeconds?: number | undefined;
}

export function evaluateSession(
  request: SessionRequest,
  policy: Policy,
  scope: Scope = {},
  floors: BackendFloors = {},
): SessionEvaluation {
  const violations: Violation[] = [];
  const d: Decision = { policy, scope, deny: (v) => void violations.push(v) };
  const { template, image, limits, runtime, network } = resolveSandbox(request, d);
  const s = policy.sessions;
  const ttlSeconds = bounded(d, 'ttlSeconds', request.ttlSeconds ?? s.ttlSeconds, s.maxTtlSeconds);
  const idleTimeoutSeconds = bounded(
    d,
    'idleTimeoutSeconds',
    request.idleTimeoutSeconds ?? s.idleTimeoutSeconds,
    s.maxIdleTimeoutSeconds,
  );
  const minIdle = floors.minIdleTimeoutSeconds;
  if (minIdle !== undefined && idleTimeoutSeconds < minIdle) {
    d.deny({
      field: 'idleTimeoutSeconds',
      message: `${idleTimeoutSeconds}s is under this backend's floor of ${minIdle}s`,
      limit: `${minIdle}s`,
      requested: `${idleTimeoutSeconds}s`,
    });
  }
  if (request.env.length + request.secrets.length > policy.ceilings.envVars) {
    d.deny({
      field: 'env',
      message: `${request.env.length + request.secrets.length} variables is over the limit of ${policy.ceilings.envVars}`,
      limit: policy.ceilings.envVars,
    });
  }
  if (violations.length > 0 || !image) return { ok: false, violations };
  return {
    ok: true,
    spec: {
      template: template?.name,
      image,
      runtime,
      workdir: WORKSPACE,
      network,
      limits,
      env: mergeEnv(template?.env ?? {}, request.env),
      secrets: request.secrets.map((e) => ({ name: e.name, value: e.value })),
      ttlSeconds,
      idleTimeoutSeconds,
      maxExecs: s.maxExecs,
    },
  };
}

/** One exec of a session: its deadline is the session's default unless it asks for less; never over the ceiling. */
export function evaluateExec(
  request: ExecRequest,
  session: EffectiveSessionSpec,
  policy: Policy,
): ExecEvaluation {
  const violations: Violation[] = [];
  const d: Decision = { policy, scope: {}, deny: (v) => void violations.push(v) };
  const ceiling = policy.ceilings.timeoutSeconds;
  const timeoutSeconds = bounded(
    d,
    'timeoutSeconds',
    request.timeoutSeconds ?? session.limits.timeoutSeconds,
    ceiling,
  );
  const cwd = request.cwd === undefined ? '' : toWorkspacePath(request.cwd);
  if (cwd === undefined) d.deny({ field: 'cwd', message: 'expected a directory inside the workspace' });
  const stdin = Buffer.from(request.stdin ?? '', 'utf8');
  const argv = request.command ? [...request.command] : ['/bin/sh', '-c', request.shell ?? ''];
  const size = stdin.length + argv.reduce((n, a) => n + Buffer.byteLength(a) + 1, 0);
  if (size > policy.ceilings.requestBytes) {
    d.deny({
      field: 'request',
      message: `command and stdin total ${size} bytes, over the limit of ${policy.ceilings.requestBytes}`,
      limit: policy.ceilings.requestBytes,
    });
  }
  if (request.env.length > policy.ceilings.envVars) {
    d.deny({
      field: 'env',
      message: `over the limit of ${policy.ceilings.envVars} variables`,
      limit: policy.ceilings.envVars,
    });
  }
  if (violations.length > 0 || cwd === undefined) return { ok: false, violations };
  return {
    ok: true,
    exec: {
      argv,
      env: request.env.map((e) => ({ name: e.name, value: e.value })),
      cwd,
      timeoutSeconds,
      stdin,
      background: request.background,
      tty: request.tty,
      outputBytes: session.limits.outputBytes,
    },
  };
}

function bounded(d: Decision, field: string, asked: number, ceiling: number): number {
  if (asked > ceiling) {
    d.deny({
      field,
      message: `${asked}s is over the ceiling of ${ceiling}s`,
      limit: `${ceiling}s`,
      requested: `${asked}s`,
    });
  }
  return Math.min(asked, ceiling);
}
