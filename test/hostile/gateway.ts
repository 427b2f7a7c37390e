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
import { serveGatewayHttp } from '../../src/cmd/gateway-http.js';
import { wireBackend, type BackendWiring, type Context } from '../../src/cmd/wiring.js';
import { loadConfig } from '../../src/config/load.js';
import { createAuthenticator } from '../../src/gateway/auth.js';
import { LOCAL_PRINCIPAL } from '../../src/gateway/principal.js';
import { silentLogger } from '../../src/observability/logger.js';
import { rawInitialize } from '../support/mcp-raw.js';

/** Room for a program's whole report: 64 KiB a stream. */
export const HOSTILE_OUTPUT_BYTES = 64 * 1024;

/** The `sandbox:` settings of every hostile gateway and operator: sandpit/* images, room for a program's whole report, a 30 s deadline. */
export const HOSTILE_SANDBOX_CONFIG = {
  imageAllowlist: ['sandpit/*'],
  maxOutputBytes: HOSTILE_OUTPUT_BYTES,
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
  return (await wired(config)).wiring;
}

async function wired(config: Record<string, unknown>): Promise<{ ctx: Context; wiring: BackendWiring }> {
  armCanary();
  const dir = mkdtempSync(path.join(tmpdir(), 'sandpit-hostile-'));
  const file = path.join(dir, 'config.yaml');
  const auth = { ...(config.auth as Record<string, unknown> | undefined), token: CANARY };
  writeFileSync(file, stringify({ ...config, auth }), { mode: 0o600 });
  const ctx = { config: loadConfig({ env: process.env, configPath: file }), logger: silentLogger() };
  return { ctx, wiring: await wireBackend(ctx) };
}

export interface ServedGateway extends BackendWiring {
  /** Base URL on 127.0.0.1 (MCP at /mcp, stateful; REST at /sessions and /runs). */
  url: string;
  /** The same gateway's second listener, whose MCP is stateless (`sandpit serve --stateless`). */
  statelessUrl: string;
  /** Stops serving, then ends the service and its sessions. */
  close(): Promise<void>;
}

/**
 * The gateway wired from `config` as wireGateway wires it, served over HTTP on 127.0.0.1 as
 * `sandpit serve` serves it: twice over one service, with stateful and with stateless MCP.
 */
export async function serveGateway(config: Record<string, unknown>): Promise<ServedGateway> {
  const { ctx, wiring } = await wired(config);
  const parts = {
    ...ctx,
    ...wiring,
    authenticator: createAuthenticator(ctx.config.auth, LOCAL_PRINCIPAL),
    version: '0.0.0-hostile',
  };
  const at = { host: '127.0.0.1', port: 0 };
  const [stateful, stateless] = await Promise.all([
    serveGatewayHttp(parts, { ...at, stateless: false }),
    serveGatewayHttp(parts, { ...at, stateless: true }),
  ]);
  return {
    ...wiring,
    url: stateful.url,
    statelessUrl: stateless.url,
    async close() {
      await Promise.all([stateful.close(), stateless.close()]);
      await wiring.service.shutdown({ endSessions: true });
    },
  };
}

/** A raw MCP initialize, as a hostile client sends it without the SDK. */
export const INITIALIZE = rawInitialize('hostile');
