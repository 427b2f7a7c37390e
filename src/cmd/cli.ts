#!/usr/bin/env node
/** The `sandpit` command: dispatches to one subcommand; every subcommand has --help. */
import { packageVersion, reportError } from './process.js';

const USAGE = `
usage: sandpit <command> [options]

Runs untrusted, model-generated code in locked-down containers.

commands:
  run       run code in a fresh sandbox and print its output       sandpit run -c 'print(1)'
  mcp       MCP server over stdio, for Claude Code, Cursor, …       sandpit mcp
  serve     MCP (Streamable HTTP) and REST gateway                  sandpit serve --port 8080
  sessions  sandboxes that last across commands (exec, cp, shell)   sandpit sessions ls
  operator  Kubernetes operator for SandboxRuns and Sandboxes       sandpit operator
  egress-proxy  Kubernetes: egress proxy of allowlisted sandboxes     sandpit egress-proxy
  audit     the audit trail: who ran what, and how it ended          sandpit audit --since 1h
  doctor    check the engine, images and runtime; name the fixes    sandpit doctor
  setup     install/start the Docker engine and build the images    sandpit setup   (root)
  images    build or list the sandbox images                        sandpit images build
  config    every setting: env variable, default, value, source     sandpit config
  version   print the version (also -V, --version)

Run \`sandpit <command> --help\` for a command's options.
Configuration: --config FILE or SANDPIT_CONFIG (YAML/JSON), SANDPIT_* and the seed's variables
(MCP_PORT, MCP_AUTH_TOKEN, SANDBOX_IMAGE_ALLOWLIST, MAX_CONTAINER_CPU, MAX_CONTAINER_MEMORY,
CONTAINER_TIMEOUT_SECONDS, DISABLE_NETWORK). \`sandpit config\` lists every setting.
`;

type Command = (argv: string[]) => Promise<number> | number;

// Each loaded on demand: a command pays only for its own libraries (the Docker client, the MCP SDK,
// express, @kubernetes/client-node), and `--help` or `--version` for none.
const COMMANDS: Record<string, () => Promise<Command>> = {
  run: async () => (await import('./run.js')).runCommand,
  audit: async () => (await import('./audit.js')).auditCommand,
  doctor: async () => (await import('./doctor.js')).doctorCommand,
  images: async () => (await import('./images.js')).imagesCommand,
  setup: async () => (await import('./setup.js')).setupCommand,
  config: async () => (await import('./config.js')).configCommand,
  mcp: async () => (await import('./mcp.js')).mcpCommand,
  serve: async () => (await import('./serve.js')).serveCommand,
  sessions: async () => (await import('./sessions.js')).sessionsCommand,
  operator: async () => (await import('./operator.js')).operatorCommand,
  'egress-proxy': async () => (await import('./egress-proxy.js')).egressProxyCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${USAGE.trim()}\n`);
    return name === undefined ? 64 : 0;
  }
  if (name === 'version' || name === '--version' || name === '-V') {
    process.stdout.write(`sandpit ${packageVersion()}\n`);
    return 0;
  }
  const load = COMMANDS[name];
  if (!load) {
    process.stderr.write(`sandpit: unknown command "${name}"\n\n${USAGE.trim()}\n`);
    return 64;
  }
  const command = await load();
  return command(rest);
}

let settled = false;
// A command whose work waits on nothing that is left (a stream nobody feeds) must not pass for done.
process.on('beforeExit', () => {
  if (settled) return;
  settled = true;
  process.stderr.write('sandpit: internal error: the command stopped before it finished\n');
  process.exitCode = 70;
});
main(process.argv.slice(2)).then(
  (code) => {
    settled = true;
    process.exitCode = code;
  },
  (e: unknown) => {
    settled = true;
    process.exitCode = reportError(e);
  },
);
