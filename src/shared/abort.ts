import { AppError } from './errors.js';

/** Resolves after `ms`, or rejects with CANCELLED as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(cancelled(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(cancelled(signal));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function cancelled(signal?: AbortSignal): AppError {
  const reason: unknown = signal?.reason;
  if (reason instanceof AppError) return reason;
  return new AppError('CANCELLED', 'the run was cancelled');
}

export function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw cancelled(signal);
}

/** Calls `fn` once when `signal` aborts; returns a function that detaches the listener. */
export function onAbort(signal: AbortSignal | undefined, fn: () => void): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    fn();
    return () => {};
  }
  signal.addEventListener('abort', fn, { once: true });
  return () => signal.removeEventListener('abort', fn);
}
