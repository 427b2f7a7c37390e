/**
 * What every `sandpit sessions` subcommand shares: the gateway flags and their help, the client
 * they name (flags, then the environment, then the config `sandpit serve` reads), usage errors, and
 * how an answer prints as JSON.
 */
import { AppError } from '../shared/errors.js';
import { GatewayClient, gatewayTarget } from './gateway-client.js';
import { loadContext } from './wiring.js';

export const GATEWAY_HELP = `
gateway options (every sessions command):
      --url URL           the gateway (default: SANDPIT_URL, else the address \`sandpit serve\` binds by the
                          same config, server.host:server.port, http://127.0.0.1:8080)
      --token TOKEN       its bearer token (default: MCP_AUTH_TOKEN, i.e. auth.token); prefer the variable,
                          since a flag shows in ps
      --config PATH       config file (YAML or JSON); also SANDPIT_CONFIG
      --json              print the gateway's answer as JSON
  -h, --help              this text`;

export const GATEWAY_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  config: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** The client of the gateway these flags, the environment and the config name. */
export function clientOf(values: { url?: string; token?: string; config?: string }): GatewayClient {
  const { config } = loadContext({ configPath: values.config, logLevel: 'warn' });
  return new GatewayClient(gatewayTarget(values, process.env, config));
}

export function usageError(message: string, command: string): AppError {
  return new AppError('INVALID_REQUEST', message, { hint: `see \`sandpit sessions ${command} --help\`` });
}

/** The one session id a subcommand takes before `--`. */
export function sessionIdOf(positionals: string[], command: string): string {
  const [id, ...extra] = positionals;
  if (id === undefined) throw usageError(`${command} needs a session ID`, command);
  if (extra.length)
    throw usageError(`unexpected "${extra[0]}": put the command after -- (${command} ID -- ARGV)`, command);
  return id;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
