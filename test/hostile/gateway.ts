/**
 * The gateway the hostile tier attacks: sandpit's own composition root (wireBackend) from a config
 * file, as `sandpit serve` builds it, holding a secret the sandbox must never see: a random canary
 * as its bearer token, in its config file (auth.token) and in its environment (MCP_AUTH_TOKEN),
 * which the operators the tier starts inherit too (test/integration/kubernetes/operator-process.ts
 * passes on every variable but SANDPIT_*).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { wireBackend, type BackendWiring } from '../../src/cmd/wiring.js';
import { loadConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/observability/logger.js';

/** The `sandbox:` settings of every hostile gateway and operator: sandpit/* images, room for a program's whole report (64 KiB a stream), a 30 s deadline. */
export const HOSTILE_SANDBOX_CONFIG = {
  imageAllowlist: ['sandpit/*'],
  maxOutputBytes: 64 * 1024,
  timeoutSeconds: 30,
};

/** This process's canary: random per test file. */
export const CANARY = `sandpit-canary-${randomBytes(16).toString('hex')}`;

/** Puts the canary in this process's environment, where the gateway (and an operator started after) reads it. */
export function armCanary(): void {
  process.env.MCP_AUTH_TOKEN = CANARY;
}

/** The secrets every hostile gateway holds, by what they are. */
export const GATEWAY_SECRETS: Readonly<Record<string, string>> = {
  'the canary token in the gateway’s (and operator’s) config and env (auth.token, MCP_AUTH_TOKEN)': CANARY,
};

/** A gateway's service and backend, wired from `config` plus the canary as its token. */
export async function wireGateway(config: Record<string, unknown>): Promise<BackendWiring> {
  armCanary();
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-hostile-'));
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, stringify({ ...config, auth: { token: CANARY } }), { mode: 0o600 });
  const loaded = loadConfig({ env: process.env, configPath: file });
  return wireBackend({ config: loaded, logger: silentLogger() });
}
