/**
 * The faults tier's harness on one machine: a real `sandpit serve` (Docker or oci backend) with its
 * own audit file and state directory, started again as itself after a crash; what it left behind
 * (containers with its owner label, processes whose command line carries a case's marker, oci
 * sandboxes); the project's own dockerd restarted by its PID; a CPU hog started and ended by PID.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, hostname } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AuditRecord } from '../../src/api/audit.js';
import type { RunResult } from '../../src/api/run.js';
import { LABELS, OWNED_FILTERS } from '../../src/backends/docker/labels.js';
import { readAuditFile } from '../support/audit.js';
import { requireDocker } from '../support/docker.js';
import {
  callTool,
  connectHttp,
  ensureBuilt,
  ROOT,
  startServe,
  tempDir,
  type Connected,
  type Served,
} from '../e2e/helpers.js';

const run = promisify(execFile);

export const TOKEN = 'faults-token-0123456789abcdef';
export const PRINCIPAL = 'faults';

export interface Answer {
  status: number;
  text: string;
  json: Record<string, unknown>;
}

export interface Gateway {
  served: Served;
  /** The audit file every one of its processes writes. */
  auditFile: string;
  rest(method: string, path: string, body?: unknown): Promise<Answer>;
  /** PUT of a raw body (a session's file). */
  put(path: string, body: string): Promise<Answer>;
  /** An MCP client over its Streamable HTTP endpoint (closed by the caller). */
  mcp(): Promise<Connected>;
  /**
   * Its audit records, each checked against the schema: once `until` holds of them (a record is
   * written just after its answer went out), or as they are after 10 s.
   */
  audit(until?: (records: AuditRecord[]) => boolean): Promise<AuditRecord[]>;
}

export interface GatewayOptions {
  backend: 'docker' | 'oci';
  /** Where the audit file goes (default: the gateway's state directory). */
  auditFile?: string;
  /** More config on top (e.g. `pool`). */
  config?: Record<string, unknown>;
}

/**
 * A `sandpit serve` of the faults tier, and how to start it again as itself (the same config,
 * instance id, state directory and audit file) after it was killed.
 */
export async function gateway(options: GatewayOptions): Promise<Gateway & { again(): Promise<Gateway> }> {
  ensureBuilt();
  await requireDocker();
  const state = tempDir(`faults-${options.backend}`);
  const auditFile = options.auditFile ?? join(state, 'audit.jsonl');
  const config = {
    auth: { tokens: [{ name: PRINCIPAL, token: TOKEN }] },
    server: { instanceId: `faults-${options.backend}-${randomBytes(4).toString('hex')}` },
    sandbox: { backend: options.backend },
    audit: { file: auditFile, flushIntervalMs: 0 },
    logging: { level: 'info' },
    ...options.config,
  };
  const start = async (): Promise<Gateway & { again(): Promise<Gateway> }> => {
    const served = await startServe(config, [], { XDG_STATE_HOME: state });
    return { ...over(served, auditFile), again: start };
  };
  return start();
}

function over(served: Served, auditFile: string): Gateway {
  return {
    served,
    auditFile,
    rest: (method, path, body) =>
      send(`${served.url}${path}`, {
        method,
        headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    put: (path, body) =>
      send(`${served.url}${path}`, { method: 'PUT', headers: { Authorization: `Bearer ${TOKEN}` }, body }),
    mcp: () => connectHttp(`${served.url}/mcp`, TOKEN),
    async audit(until = () => true) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const records = readAuditFile(auditFile);
        if (until(records) || Date.now() > deadline) return records;
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

async function send(url: string, init: RequestInit): Promise<Answer> {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, text, json: text.startsWith('{') ? (JSON.parse(text) as Answer['json']) : {} };
}

/** A tool's structured result (a run's), failing with its text when the call was a tool error. */
export async function runTool(
  client: Connected['client'],
  args: Record<string, unknown>,
): Promise<RunResult> {
  const result: CallToolResult = await callTool(client, 'run_code', args);
  assert.ok(!result.isError, `run_code answered a tool error: ${JSON.stringify(result.content)}`);
  return result.structuredContent as unknown as RunResult;
}

/** A marker for a case's code: its processes are found on the host by it (see processesWith). */
export function marker(name: string): string {
  return `faults-${name}-${randomBytes(4).toString('hex')}`;
}

/**
 * A shell command that sleeps `seconds` as a process named `mark` (argv[0]): found on the host by
 * processesWith(mark) while it runs, whatever the shell around it execs.
 */
export function sleeper(mark: string, seconds: number): string {
  return `bash -c 'exec -a ${mark} sleep ${seconds}'`;
}

/** A shell command that spins on a CPU forever as a process named `mark` (see sleeper). */
export function spinner(mark: string): string {
  return `bash -c 'exec -a ${mark} bash -c "while :; do :; done"'`;
}

/** Host processes whose command line contains `needle` (sandboxes' processes too: they share the kernel). */
export function processesWith(needle: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue; // gone meanwhile
    }
    if (cmdline.includes(needle) && Number(pid) !== process.pid) found.push(`${pid}: ${cmdline.trim()}`);
  }
  return found;
}

/** The containers (name and state) the gateway with `pid` made, as its owner label says. */
export async function containersOf(pid: number): Promise<{ name: string; state: string }[]> {
  const docker = await requireDocker();
  const prefix = `${hostname()}:${pid}:`;
  const list = await docker.listContainers({ all: true, filters: { label: OWNED_FILTERS } });
  return list
    .filter((c) => (c.Labels[LABELS.owner] ?? '').startsWith(prefix))
    .map((c) => ({ name: c.Names[0]?.replace(/^\//, '') ?? c.Id, state: c.State }));
}

/**
 * Waits until every container the gateway with `pid` made is a live one (`keep`: e.g. its warm
 * pools' running containers), failing with what is left otherwise.
 */
export async function onlyLiveContainersOf(
  pid: number,
  keep: (c: { name: string; state: string }) => boolean = () => false,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = (await containersOf(pid)).filter((c) => !keep(c));
    if (left.length === 0) return;
    if (Date.now() > deadline) assert.deepEqual(left, [], `containers of gateway ${pid} left`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A warm pool's container, waiting for its job. */
export const idlePoolContainer = (c: { name: string; state: string }): boolean =>
  c.name.startsWith('sandpit-pool-') && c.state === 'running';

/** The PID of the dockerd test/env/docker.sh started (its status says it). */
export async function dockerdPid(): Promise<number> {
  const { stdout } = await run('bash', [join(ROOT, 'scripts/docker-engine.sh'), 'status']);
  const pid = /dockerd:\s+pid (\d+), started by/.exec(stdout)?.[1];
  assert.ok(pid, `the project's own dockerd runs (docker-engine.sh status):\n${stdout}`);
  return Number(pid);
}

/**
 * Restarts the project's own dockerd, by its PID (scripts/docker-engine.sh restart: SIGTERM, wait
 * for it to exit, start it again). Nothing else may use the engine meanwhile: it kills every
 * container. The images outlive a restart (test/env/docker.sh restart would also check them, for
 * seconds more).
 */
export async function restartEngine(): Promise<{ before: number; after: number; ms: number }> {
  const before = await dockerdPid();
  const t0 = performance.now();
  await run('bash', [join(ROOT, 'scripts/docker-engine.sh'), 'restart'], { timeout: 120_000 });
  const ms = performance.now() - t0;
  const after = await dockerdPid();
  assert.notEqual(after, before, 'a new dockerd runs');
  return { before, after, ms };
}

export interface Hog {
  pids: number[];
  stop(): Promise<void>;
}

/** One busy loop per core on the host (plain processes of this test, ended by their PIDs). */
export function cpuHog(): Hog {
  const children: ChildProcess[] = cpus().map(() =>
    spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }),
  );
  return {
    pids: children.map((c) => c.pid!),
    async stop() {
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.exitCode !== null || c.signalCode !== null) return resolve();
              c.once('exit', () => resolve());
              process.kill(c.pid!, 'SIGKILL');
            }),
        ),
      );
    },
  };
}
