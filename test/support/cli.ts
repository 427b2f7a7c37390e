/**
 * The `sandpit` command, built (test/support/built-cli.ts: rebuilt when a source file is newer),
 * for unit tests: exit codes and output as a user sees them. Through tsx, each start took a second
 * more of CPU.
 */
import { spawn, spawnSync } from 'node:child_process';
import { BUILT_CLI, ensureBuilt, ROOT } from './built-cli.js';

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Only PATH and HOME from this process, plus `env`. */
const envWith = (env: Record<string, string>) => ({
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '/root',
  ...env,
});

/** Runs the CLI and waits for it (nothing in this process answers meanwhile). */
export function sandpit(args: string[], env: Record<string, string> = {}): CliRun {
  ensureBuilt();
  const r = spawnSync(process.execPath, [BUILT_CLI, ...args], {
    cwd: ROOT,
    env: envWith(env),
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs the CLI without blocking, so that a server in this process can answer it. */
export function sandpitAsync(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  ensureBuilt();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BUILT_CLI, ...args], {
      cwd: ROOT,
      env: envWith(env),
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
