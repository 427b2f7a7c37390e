/** The one exponential backoff: every retry loop waits this long before its next attempt. */
export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Spread retries of many clients: a random delay between half and all of the step. */
  jitter?: boolean;
}

/** The delay before retry `attempt` (1, 2, …): initialMs × 2^(attempt − 1), at most maxMs. */
export function backoffDelay(
  attempt: number,
  options: BackoffOptions,
  random: () => number = Math.random,
): number {
  const step = Math.min(options.maxMs, options.initialMs * 2 ** Math.max(0, attempt - 1));
  return options.jitter ? step * (0.5 + random() / 2) : step;
}
