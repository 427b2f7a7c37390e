/** Where the audit file is: `audit.file`, or for the gateway the XDG state directory's default. */
import { join, resolve } from 'node:path';
import { defaultStateDir } from './instance.js';
import type { Config } from './schema.js';

type Env = Readonly<Record<string, string | undefined>>;

/** `${XDG_STATE_HOME:-~/.local/state}/sandpit/audit.jsonl`. */
export function defaultAuditFile(env: Env): string {
  return join(defaultStateDir(env), 'audit.jsonl');
}

/** The file `audit.file` names (from the working directory), else the default: what `sandpit audit` reads. */
export function auditFilePath(config: Config, env: Env): string {
  return config.audit.file !== undefined ? resolve(config.audit.file) : defaultAuditFile(env);
}

export interface AuditFileSettings {
  path: string;
  maxBytes: number;
  maxFiles: number;
  flushIntervalMs: number;
}

/**
 * The audit file a process writes, or undefined for none (`audit.enabled: false`). The gateway
 * falls back to the default path; the operator writes a file only when `audit.file` names one (in a
 * pod the log is the trail).
 */
export function auditFileFor(
  config: Config,
  env: Env,
  role: 'gateway' | 'operator',
): AuditFileSettings | undefined {
  const { enabled, file, maxBytes, maxFiles, flushIntervalMs } = config.audit;
  if (!enabled) return undefined;
  const path = file !== undefined || role === 'gateway' ? auditFilePath(config, env) : undefined;
  return path === undefined ? undefined : { path, maxBytes, maxFiles, flushIntervalMs };
}
