// Run a local command (the cluster script, helm, kubectl, docker) and collect its output.
import { spawn } from 'node:child_process';

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  input?: string | Buffer;
  /** SIGKILL the command after this long (default 120 s) */
  timeoutMs?: number;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  durationMs: number;
}

export function runCommand(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        durationMs: performance.now() - started,
      });
    });
    // A command that exits without reading its stdin fails the write with EPIPE: its exit status says what happened.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

/** Like runCommand, but a non-zero exit is an error that carries the command's output. */
export async function runOk(
  file: string,
  args: readonly string[],
  opts: RunOptions = {},
): Promise<RunResult> {
  const res = await runCommand(file, args, opts);
  if (res.code !== 0) {
    throw new Error(
      `${file} ${args.join(' ')} failed (exit ${res.code ?? res.signal})\n--- stdout\n${res.stdout}\n--- stderr\n${res.stderr}`,
    );
  }
  return res;
}
