/**
 * e2e support: the built CLI (rebuilt when src is newer), spawned `sandpit mcp` / `sandpit serve`
 * processes, real MCP clients, and checks on the containers a server left behind. Servers started
 * here are stopped here, by their own pid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import {
  connect as connectNet,
  createServer as createNetServer,
  type AddressInfo,
  type Socket,
} from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type Docker from 'dockerode';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { LABELS, OWNED_FILTERS } from '../../src/backends/docker/labels.js';
import { BUILT_CLI as CLI, ROOT, ensureBuilt } from '../support/built-cli.js';
import { requireDocker } from '../support/docker.js';

export { CLI, ROOT, ensureBuilt };

const SEED_VARS = [
  'MCP_PORT',
  'MCP_AUTH_TOKEN',
  'SANDBOX_IMAGE_ALLOWLIST',
  'MAX_CONTAINER_CPU',
  'MAX_CONTAINER_MEMORY',
  'CONTAINER_TIMEOUT_SECONDS',
  'DISABLE_NETWORK',
];

/** This process's environment without any sandpit or seed setting, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('SANDPIT_') && !SEED_VARS.includes(k)) env[k] = v;
  }
  return { ...env, ...extra };
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `sandpit-e2e-${prefix}-`));
}

export interface Connected {
  client: Client;
  stderr: string[];
  pid: number | null;
  close(): Promise<void>;
}

export function newClient(): Client {
  return new Client({ name: 'sandpit-e2e', version: '1.0.0' });
}

/** The built CLI's `mcp` over stdio (or another command line, e.g. npx in an install dir). */
export async function connectStdio(
  options: { command?: string; args?: string[]; cwd?: string; env?: Record<string, string> } = {},
): Promise<Connected> {
  const transport = new StdioClientTransport({
    command: options.command ?? process.execPath,
    args: options.args ?? [CLI, 'mcp'],
    env: options.env ?? cleanEnv(),
    ...(options.cwd ? { cwd: options.cwd } : {}),
    stderr: 'pipe',
  });
  const stderr: string[] = [];
  transport.stderr?.on('data', (d: Buffer) => stderr.push(d.toString('utf8')));
  const client = newClient();
  await client.connect(transport);
  return { client, stderr, pid: transport.pid, close: () => client.close() };
}

export interface Served {
  url: string;
  pid: number;
  logs: string[];
  stop(): Promise<number | null>;
}

/** A port that was free a moment ago, on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * `sandpit serve` with `config` (or what `config` makes of the server's URL) as its config file;
 * resolves once it answers GET /health.
 */
export async function startServe(
  configOf: object | ((url: string) => object),
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<Served> {
  const dir = tempDir('serve');
  const configPath = join(dir, 'config.json');
  const port = await freePort();
  const config = typeof configOf === 'function' ? configOf(`http://127.0.0.1:${port}`) : configOf;
  // Each server its own instance, so none adopts another's sessions; a test that restarts one names its own.
  const given = (config as { server?: { instanceId?: string } }).server?.instanceId;
  const instanceId = given ?? `e2e-${process.pid}-${port}`;
  const server = (config as { server?: object }).server;
  writeFileSync(configPath, JSON.stringify({ ...config, server: { ...server, instanceId } }));
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--port', String(port), '--config', configPath, ...args],
    {
      env: cleanEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const logs: string[] = [];
  child.stderr.on('data', (d: Buffer) => logs.push(d.toString('utf8')));
  createInterface({ input: child.stdout }).on('line', (line) => logs.push(line));
  let exited: number | null | undefined;
  child.once('exit', (code) => (exited = code));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited !== undefined) throw new Error(`serve exited with ${exited}:\n${logs.join('\n')}`);
    if (Date.now() > deadline) {
      await stopProcess(child);
      throw new Error(`serve did not answer within 60 s:\n${logs.join('\n')}`);
    }
    try {
      await (await fetch(`${url}/health`)).body?.cancel();
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const stop = async (): Promise<number | null> => {
    const code = await stopProcess(child);
    // A stopped serve leaves its sessions for adoption: those of an instance only this call knew end here.
    if (given === undefined) await removeInstanceSessions(instanceId);
    return code;
  };
  return { url, pid: child.pid!, logs, stop };
}

async function removeInstanceSessions(instanceId: string): Promise<void> {
  const docker = await requireDocker();
  const left = await docker.listContainers({
    all: true,
    filters: { label: [...OWNED_FILTERS, `${LABELS.instance}=${instanceId}`] },
  });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true })));
}

export function stopProcess(child: ChildProcess): Promise<number | null> {
  // Ended already (a test may kill it): null when a signal ended it.
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('exit', (code) => {
      clearTimeout(kill);
      resolve(code);
    });
    child.kill('SIGTERM');
  });
}

export async function connectHttp(
  url: string,
  token?: string,
): Promise<Connected & { sessionId: string | undefined }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: token ? { Authorization: `Bearer ${token}` } : {} },
  });
  const client = newClient();
  await client.connect(transport);
  return {
    client,
    stderr: [],
    pid: null,
    sessionId: transport.sessionId,
    close: async () => {
      if (transport.sessionId) await transport.terminateSession().catch(() => undefined);
      await client.close();
    },
  };
}

export interface Notice {
  seq: number;
  at: number;
  logger: string | undefined;
  data: unknown;
}

/** Records every logging notification with a sequence number shared with `mark()`. */
export function recordNotifications(client: Client): { notices: Notice[]; mark: () => number } {
  let seq = 0;
  const notices: Notice[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    notices.push({ seq: seq++, at: performance.now(), logger: n.params.logger, data: n.params.data });
  });
  return { notices, mark: () => seq++ };
}

export function textOf(result: CallToolResult): string {
  return result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
}

export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, {
    timeout: 120_000,
  })) as CallToolResult;
}

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** sandpit containers of one run (any state). */
export async function containersOfRun(docker: Docker, runId: string): Promise<string[]> {
  const list = await docker.listContainers({
    all: true,
    filters: { label: [...OWNED_FILTERS, `sandpit.dev/run=${runId}`] },
  });
  return list.map((c) => c.Names[0] ?? c.Id);
}

/** sandpit containers created by the process with `pid` on this host (its owner label). */
export async function containersOfPid(docker: Docker, pid: number): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: OWNED_FILTERS } });
  const prefix = `${hostname()}:${pid}:`;
  return list
    .filter((c) => (c.Labels['sandpit.dev/owner'] ?? '').startsWith(prefix))
    .map((c) => c.Names[0] ?? c.Id);
}

/**
 * The container of the process with `pid` in which a process whose command line contains `needle`
 * runs. Finds the container serving a run whether it was started cold (labelled with the run) or
 * taken from a warm pool (labelled when the pool started it, before any run).
 */
export async function containerRunning(
  docker: Docker,
  pid: number,
  needle: string,
): Promise<string | undefined> {
  const list = await docker.listContainers({ filters: { label: OWNED_FILTERS } });
  const prefix = `${hostname()}:${pid}:`;
  for (const c of list.filter((c) => (c.Labels['sandpit.dev/owner'] ?? '').startsWith(prefix))) {
    try {
      const top = (await docker.getContainer(c.Id).top({ ps_args: '-eo pid,args' })) as {
        Processes?: string[][];
      };
      if ((top.Processes ?? []).some((p) => p.join(' ').includes(needle))) return c.Id;
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

export async function containerExists(docker: Docker, id: string): Promise<boolean> {
  try {
    await docker.getContainer(id).inspect();
    return true;
  } catch {
    return false;
  }
}

/** Waits until none of `runIds` has a container left. */
export async function waitRunsGone(docker: Docker, runIds: string[], timeoutMs = 20_000): Promise<void> {
  await waitFor(
    `containers of ${runIds.join(', ')} to be removed`,
    async () =>
      (await Promise.all(runIds.map((id) => containersOfRun(docker, id)))).flat().length === 0
        ? true
        : undefined,
    timeoutMs,
  );
}

/** A loopback TCP proxy to `port` whose `cut()` drops every open connection. */
export async function cuttableProxy(
  port: number,
): Promise<{ url: string; connections: () => number; cut: () => void; close: () => Promise<void> }> {
  const open = new Set<Socket>();
  let total = 0;
  const server = createNetServer((client) => {
    total++;
    const upstream = connectNet(port, '127.0.0.1');
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port: own } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${own}/mcp`,
    connections: () => total,
    cut: () => {
      for (const s of open) s.destroy();
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
