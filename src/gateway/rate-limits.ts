/**
 * Per-principal rate limits on runs: runs started per minute and output bytes per minute, over a
 * sliding window of the last 60 s. Off unless configured. Counted in this gateway process only:
 * two replicas each allow the limit.
 */
import { busy, type AppError } from '../shared/errors.js';
import type { Principal } from './principal.js';

export const RATE_WINDOW_MS = 60_000;

export interface RateLimitOptions {
  /** Runs one principal may start a minute (none when absent); a principal's own value wins. */
  runsPerMinute?: number | undefined;
  /** Bytes of output (stdout + stderr, as the program wrote them) one principal's runs may make a minute. */
  outputBytesPerMinute?: number | undefined;
  now?: () => number;
}

interface Event {
  at: number;
  amount: number;
}

interface Window {
  runs: Event[];
  bytes: Event[];
}

export class RateLimits {
  private readonly options: RateLimitOptions;
  private readonly now: () => number;
  private readonly windows = new Map<string, Window>();

  constructor(options: RateLimitOptions = {}) {
    this.options = options;
    this.now = options.now ?? Date.now;
  }

  /**
   * Counts one run of the principal, or throws BUSY with the seconds until it would be allowed
   * (`retryAfterSeconds`) when either limit is spent.
   */
  admit(principal: Pick<Principal, 'id' | 'name' | 'runsPerMinute' | 'outputBytesPerMinute'>): void {
    const runs = principal.runsPerMinute ?? this.options.runsPerMinute;
    const bytes = principal.outputBytesPerMinute ?? this.options.outputBytesPerMinute;
    if (runs === undefined && bytes === undefined) return;
    const now = this.now();
    const window = this.windowOf(principal.id, now);
    if (runs !== undefined && window.runs.length >= runs) {
      throw limited(
        `"${principal.name}" started ${runs} runs in the last minute, its limit`,
        retryAfter(window.runs, window.runs.length - runs + 1, now),
      );
    }
    if (bytes !== undefined && total(window.bytes) >= bytes) {
      throw limited(
        `"${principal.name}"'s runs wrote ${total(window.bytes)} bytes of output in the last minute, over its limit of ${bytes}`,
        retryAfterBytes(window.bytes, bytes, now),
      );
    }
    window.runs.push({ at: now, amount: 1 });
  }

  /** Counts the output of one of the principal's runs (when it ends), where a bytes limit applies. */
  output(principal: Pick<Principal, 'id' | 'outputBytesPerMinute'>, bytes: number): void {
    const limit = principal.outputBytesPerMinute ?? this.options.outputBytesPerMinute;
    if (limit === undefined || bytes <= 0) return;
    const now = this.now();
    this.windowOf(principal.id, now).bytes.push({ at: now, amount: bytes });
  }

  /** The principal's window with what fell out of it dropped; windows left empty are forgotten. */
  private windowOf(id: string, now: number): Window {
    for (const [key, w] of this.windows) {
      prune(w, now);
      if (w.runs.length === 0 && w.bytes.length === 0 && key !== id) this.windows.delete(key);
    }
    let window = this.windows.get(id);
    if (!window) this.windows.set(id, (window = { runs: [], bytes: [] }));
    return window;
  }
}

function prune(w: Window, now: number): void {
  const from = now - RATE_WINDOW_MS;
  while (w.runs[0] && w.runs[0].at <= from) w.runs.shift();
  while (w.bytes[0] && w.bytes[0].at <= from) w.bytes.shift();
}

function total(events: Event[]): number {
  return events.reduce((sum, e) => sum + e.amount, 0);
}

/** Seconds until the `n` oldest events have left the window. */
function retryAfter(events: Event[], n: number, now: number): number {
  const at = events[Math.min(n, events.length) - 1]?.at ?? now;
  return Math.max(1, Math.ceil((at + RATE_WINDOW_MS - now) / 1000));
}

/** Seconds until the bytes in the window are under the limit again. */
function retryAfterBytes(events: Event[], limit: number, now: number): number {
  let sum = total(events);
  let n = 0;
  while (sum >= limit && n < events.length) sum -= events[n++]!.amount;
  return retryAfter(events, n, now);
}

function limited(message: string, seconds: number): AppError {
  return busy(message, {
    retryAfterSeconds: seconds,
    hint: `retry after ${seconds} s; the limit counts the last minute, per token, in this gateway process`,
  });
}
