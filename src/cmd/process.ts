/**
 * The process around a command: where the package lies, its version, how a port flag is read, how
 * the commands learn they should stop, how the Kubernetes credentials are found, and how an error
 * reaches the terminal. Commands share these so that each is written once.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { KubeConfigSource } from '../kube/config.js';
import { AppError, isAppError } from '../shared/errors.js';

/** The package root (holds images/ and scripts/), from src/cmd or dist/cmd alike. */
export const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The package's version, from package.json (src/cmd or dist/cmd alike). */
export function packageVersion(): string {
  return (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
}

/** A port from a flag's text: 0–65535 (0 picks a free one). */
export function toPort(text: string, flag: string): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isInteger(n) || n < 0 || n > 65535)
    throw new AppError('INVALID_REQUEST', `${flag} expects 0-65535, got "${text}"`);
  return n;
}

export interface ShutdownSignal {
  /** Aborts on the first SIGINT or SIGTERM. */
  signal: AbortSignal;
  /** Stops listening (a command that finished on its own). */
  dispose(): void;
}

/** SIGINT and SIGTERM as one abort signal; `onSignal` hears which came first. */
export function shutdownSignal(onSignal?: (signal: NodeJS.Signals) => void): ShutdownSignal {
  const stop = new AbortController();
  const handler = (signal: NodeJS.Signals): void => {
    if (stop.signal.aborted) return;
    onSignal?.(signal);
    stop.abort();
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  return {
    signal: stop.signal,
    dispose: () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    },
  };
}

/** Resolves when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/**
 * Where Kubernetes credentials come from: an explicit kubeconfig (flag or config), else
 * KUBECONFIG, else the pod's service account when running in a cluster, else ~/.kube/config.
 */
export function kubeconfigSource(explicit: string | undefined): KubeConfigSource {
  return {
    kubeconfigPath: explicit ?? process.env.KUBECONFIG,
    inCluster: Boolean(process.env.KUBERNETES_SERVICE_HOST),
  };
}

/** Prints an error the way a user can act on it, and returns the exit code to use. */
export function reportError(e: unknown): number {
  if (isAppError(e)) {
    process.stderr.write(`sandpit: ${e.message}\n`);
    for (const v of e.violations) {
      const limit = v.limit !== undefined ? ` (limit: ${v.limit})` : '';
      process.stderr.write(`  - ${v.field}: ${v.message}${limit}\n`);
    }
    if (e.hint) process.stderr.write(`hint: ${e.hint}\n`);
    return e.exitCode;
  }
  process.stderr.write(
    `sandpit: unexpected error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
  );
  return 70;
}
