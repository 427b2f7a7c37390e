/** Waiting with a bound: the one place a promise is raced against a timer. */

/** The promise's value, or `undefined` once `ms` have passed first (the promise is left to settle alone). */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** The promise's value, or a rejection with `message` once `ms` have passed first. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  const settled = await within(
    promise.then((value) => ({ value })),
    ms,
  );
  if (!settled) throw new Error(message);
  return settled.value;
}

/** Checks every `intervalMs` until `check` holds (true) or `timeoutMs` has passed (false). */
export async function pollUntil(
  check: () => boolean | Promise<boolean>,
  options: { intervalMs: number; timeoutMs: number; signal?: AbortSignal },
): Promise<boolean> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline || options.signal?.aborted) return false;
    await new Promise((r) => setTimeout(r, Math.min(options.intervalMs, Math.max(0, deadline - Date.now()))));
  }
}
