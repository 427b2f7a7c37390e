/**
 * One sandbox of the OCI backend: its bundle (config.json beside a shared read-only root), the
 * runtime process that runs it in the foreground (`runc run --keep`, `runsc run`) with the
 * sandbox's stdio as its own pipes, and its removal. No daemon: the runner's stdin and stdout are
 * pipes from this process, and the runtime's exit status is the sandbox's.
 *
 * If this process dies, the runner's stdin ends, and the runner kills its program and exits (see
 * images/runner/sandpit-runner.c), so nothing runs on; what is left (the stopped container, its
 * cgroup, its bundle) is the reaper's. An egress sandbox's gate (the proxy's socket, mounted into
 * it) belongs to the container: it closes when the container is removed.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import type { EgressGate } from '../../egress/socket-gates.js';
import { AppError } from '../../shared/errors.js';
import { within } from '../../shared/time.js';
import { bundleDir, cgroupDir, CGROUP_CONTROLLERS, type OciLayout, type OciRuntime } from './layout.js';
import { makeMemoryCgroup } from './memory-cgroup.js';
import type { OciSpec } from './oci-spec.js';
import { runtimeInvocation, type RuntimeBinaries, type RuntimeCommand } from './runtime-command.js';

const DIAGNOSTICS_BYTES = 4096;
/** How long removal waits for the runtime to end after a kill before it deletes the container anyway. */
const EXIT_WAIT_MS = 10_000;

export interface OciHost {
  layout: OciLayout;
  binaries: RuntimeBinaries;
}

/** What a sandbox is made from: its runtime, container id and config.json. */
export interface OciSandbox {
  runtime: OciRuntime;
  id: string;
  spec: OciSpec;
  /** An egress sandbox's door to the proxy, whose directory the spec mounts; none without egress. */
  gate?: EgressGate | undefined;
}

export interface ContainerExit {
  /** The runtime's exit status: the sandbox's main process's (128 + signal when it was killed). */
  code: number | null;
}

export class OciContainer {
  readonly id: string;
  readonly runtime: OciRuntime;
  /** An egress sandbox's door to the proxy (bound to the run or session it serves); none without egress. */
  readonly gate: EgressGate | undefined;
  private readonly host: OciHost;
  private readonly process: ChildProcessWithoutNullStreams;
  private diagnostics = '';
  /** Resolves once the runtime process has exited and its pipes are closed. */
  readonly exited: Promise<ContainerExit>;
  private isExited = false;
  private removal: Promise<void> | undefined;

  private constructor(host: OciHost, sandbox: OciSandbox, process: ChildProcessWithoutNullStreams) {
    this.host = host;
    this.runtime = sandbox.runtime;
    this.id = sandbox.id;
    this.gate = sandbox.gate;
    this.process = process;
    this.exited = new Promise((resolve) => {
      process.on('close', (code) => resolve({ code }));
      process.on('error', () => resolve({ code: null }));
    });
    void this.exited.then(() => (this.isExited = true));
  }

  /**
   * Writes the bundle and starts the runtime; `sink` gets the runner's stdout. Leaves nothing
   * behind on failure (the gate closed).
   */
  static async start(
    host: OciHost,
    sandbox: OciSandbox,
    sink: (data: Buffer) => void,
  ): Promise<OciContainer> {
    const bundle = bundleDir(host.layout, sandbox.id);
    try {
      await mkdir(bundle, { recursive: true, mode: 0o700 });
      await writeFile(join(bundle, 'config.json'), JSON.stringify(sandbox.spec), { mode: 0o600 });
      if (sandbox.runtime === 'runsc')
        await makeMemoryCgroup(host.layout, sandbox.id, sandbox.spec.linux.resources.memory);
    } catch (e) {
      await rm(bundle, { recursive: true, force: true });
      await sandbox.gate?.close().catch(() => {});
      throw new AppError('BACKEND_ERROR', `cannot write the bundle of ${sandbox.id}: ${String(e)}`, {
        cause: e,
      });
    }
    const { file, args } = runtimeInvocation(
      sandbox.runtime,
      { kind: 'run', bundle, id: sandbox.id, egress: sandbox.gate !== undefined },
      host,
    );
    const child = spawn(file, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const container = new OciContainer(host, sandbox, child);
    const text = new StringDecoder('utf8');
    child.stdout.on('data', sink);
    child.stderr.on('data', (b: Buffer) => {
      if (container.diagnostics.length < DIAGNOSTICS_BYTES) container.diagnostics += text.write(b);
    });
    child.stdin.on('error', () => {}); // EPIPE once the sandbox is gone: its end is seen on stdout
    return container;
  }

  /** False once the runtime process exited or removal began. */
  get alive(): boolean {
    return !this.isExited && this.removal === undefined;
  }

  /** Writes to the runner's stdin in one go; resolves once the pipe took it. */
  write(parts: readonly Buffer[]): Promise<void> {
    const stdin = this.process.stdin;
    if (!this.alive) return Promise.reject(new Error('the sandbox is not running'));
    return new Promise((resolve, reject) => {
      stdin.cork();
      let ok = true;
      for (const part of parts) ok = stdin.write(part, (e) => (e ? reject(e) : undefined));
      stdin.uncork();
      if (ok) return resolve();
      stdin.once('drain', () => resolve());
    });
  }

  /** What the runtime and the runner wrote to stderr (its first few KiB). */
  get stderr(): string {
    return this.diagnostics;
  }

  /** `message`, with what the runtime and the runner wrote to stderr. */
  diagnosis(message: string): string {
    const d = this.diagnostics.trim();
    return d ? `${message}: ${d}` : message;
  }

  /** Kills every process of the sandbox (the runtime's kill; its run process then exits). Never throws. */
  async kill(): Promise<void> {
    if (this.isExited) return;
    for (let attempt = 0; attempt < 20 && !this.isExited; attempt++) {
      // Until the runtime has made the container, its kill finds none: try again shortly.
      if (await this.command({ kind: 'kill', id: this.id })) return;
      await Promise.race([this.exited, new Promise((r) => setTimeout(r, 50))]);
    }
  }

  /** Whether the kernel's OOM killer killed a process in the sandbox's memory cgroup. */
  async oomKilled(): Promise<boolean> {
    try {
      const text = await readFile(
        join(cgroupDir(this.host.layout, 'memory', this.id), 'memory.oom_control'),
        'utf8',
      );
      return Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0) > 0;
    } catch {
      return false;
    }
  }

  /**
   * Kills (if need be) and deletes the container, its bundle and its cgroups, then closes its gate.
   * Idempotent; never throws.
   */
  remove(): Promise<void> {
    this.removal ??= removeContainer(this.host, this.runtime, this.id, async () => {
      this.process.stdin.destroy();
      if (await within(this.exited, 2000)) return;
      await this.kill();
      await within(this.exited, EXIT_WAIT_MS);
    }).then(() => this.gate?.close().catch(() => {}));
    return this.removal;
  }

  /** Runs one runtime command about this container; true when it succeeded. */
  private command(command: RuntimeCommand): Promise<boolean> {
    return runtimeCommand(this.host, this.runtime, command);
  }
}

/** Runs `command` with the runtime to its end; true on exit status 0. Never throws. */
export function runtimeCommand(
  host: OciHost,
  runtime: OciRuntime,
  command: RuntimeCommand,
): Promise<boolean> {
  const { file, args } = runtimeInvocation(runtime, command, host);
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: 'ignore' });
    child.on('error', () => resolve(false));
    child.on('close', (code) => resolve(code === 0));
  });
}

/**
 * Deletes a container of sandpit's: `stop` first ends its process, then the runtime deletes it
 * (its state and cgroups), then its bundle and any cgroup folder left over are removed.
 */
export async function removeContainer(
  host: OciHost,
  runtime: OciRuntime,
  id: string,
  stop: () => Promise<void> = async () => {},
): Promise<void> {
  try {
    await stop();
    await runtimeCommand(host, runtime, { kind: 'delete', id });
    await rm(bundleDir(host.layout, id), { recursive: true, force: true });
    await removeCgroups(host.layout, id);
  } catch {
    // What is left is the reaper's.
  }
}

/** Removes the run's cgroup folders that the runtime left (runsc's, or after a failed delete). */
export async function removeCgroups(layout: OciLayout, id: string): Promise<void> {
  await Promise.all(CGROUP_CONTROLLERS.map((c) => rmdir(cgroupDir(layout, c, id)).catch(() => undefined)));
}
