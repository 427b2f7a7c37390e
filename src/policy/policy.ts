/**
 * The policy: templates, the image allowlist, runtimes, and the defaults and ceilings of every limit.
 * Built once from config; `evaluate()` applies it to a request.
 */
import type { EgressEntry } from '../api/egress.js';
import { DEFAULT_OUTPUT_CAPS, type OutputCaps } from '../api/outputs.js';
import type { Template } from './templates.js';
import { BUILTIN_TEMPLATES } from './templates.js';

export interface Ceilings {
  cpuMilli: number;
  memoryBytes: number;
  pids: number;
  workspaceBytes: number;
  tmpBytes: number;
  timeoutSeconds: number;
  /** Bytes kept of each output stream (head + tail). */
  outputBytes: number;
  /** Bytes of code, files, stdin, argv and env together. */
  requestBytes: number;
  /** Largest file a session download returns. */
  downloadBytes: number;
  files: number;
  envVars: number;
  /** What a run's `outputs` collect at most, and what a result shows inline. */
  outputs: OutputCaps;
}

/** What a session may have: its lifetime, idle time and concurrent execs (defaults and ceilings). */
export interface SessionCeilings {
  ttlSeconds: number;
  maxTtlSeconds: number;
  idleTimeoutSeconds: number;
  maxIdleTimeoutSeconds: number;
  maxExecs: number;
}

export const DEFAULT_SESSION_CEILINGS: SessionCeilings = {
  ttlSeconds: 3600,
  maxTtlSeconds: 86_400,
  idleTimeoutSeconds: 600,
  maxIdleTimeoutSeconds: 86_400,
  maxExecs: 16,
};

/** The config's side of egress: whether it is off, and the most any sandbox may reach. */
export interface EgressPolicy {
  /** DISABLE_NETWORK: every sandbox has egress none, and an allowlist request is refused. */
  disabled: boolean;
  ceiling: readonly EgressEntry[];
}

export const NO_EGRESS_POLICY: EgressPolicy = { disabled: true, ceiling: [] };

export interface Policy {
  templates: readonly Template[];
  sessions: SessionCeilings;
  imageAllowlist: readonly string[];
  ceilings: Ceilings;
  /** The runtime used when a request names none; undefined means the engine's default. */
  defaultRuntime: string | undefined;
  allowedRuntimes: readonly string[];
  /** Egress: off (DISABLE_NETWORK), or the ceiling of every allowlist. */
  egress: EgressPolicy;
}

export const DEFAULT_CEILINGS: Ceilings = {
  cpuMilli: 1000,
  memoryBytes: 512 * 1024 ** 2,
  pids: 128,
  workspaceBytes: 64 * 1024 ** 2,
  tmpBytes: 64 * 1024 ** 2,
  timeoutSeconds: 30,
  outputBytes: 1024 ** 2,
  requestBytes: 4 * 1024 ** 2,
  downloadBytes: 64 * 1024 ** 2,
  files: 256,
  envVars: 128,
  outputs: DEFAULT_OUTPUT_CAPS,
};

export interface PolicyOptions {
  templates?: readonly Template[];
  imageAllowlist?: readonly string[];
  ceilings?: Partial<Ceilings>;
  sessions?: Partial<SessionCeilings>;
  defaultRuntime?: string;
  allowedRuntimes?: readonly string[];
  egress?: EgressPolicy;
}

export function createPolicy(options: PolicyOptions = {}): Policy {
  const templates = options.templates ?? BUILTIN_TEMPLATES;
  const defaultRuntime = options.defaultRuntime;
  return {
    templates,
    imageAllowlist: options.imageAllowlist ?? defaultImageAllowlist(templates),
    ceilings: { ...DEFAULT_CEILINGS, ...options.ceilings },
    sessions: { ...DEFAULT_SESSION_CEILINGS, ...options.sessions },
    defaultRuntime,
    allowedRuntimes: options.allowedRuntimes ?? (defaultRuntime ? [defaultRuntime] : ['runc', 'runsc']),
    egress: options.egress ?? NO_EGRESS_POLICY,
  };
}

/** Every template's image, plus `python:3.11` so the seed's examples run verbatim. */
export function defaultImageAllowlist(templates: readonly Template[]): string[] {
  return [...new Set([...templates.map((t) => t.image), 'python:3.11'])];
}
