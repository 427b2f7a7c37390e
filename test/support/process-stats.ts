/**
 * Another process's memory and descriptors, read from /proc: what the load tier holds a gateway
 * process to.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Resident set size of `pid`, in bytes (VmRSS). */
export function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  if (!line) throw new Error(`no VmRSS for process ${pid}`);
  return Number(/(\d+)/.exec(line)?.[1]) * 1024;
}

/** Open file descriptors of `pid`. */
export function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** Samples `pid`'s RSS every `intervalMs` until stopped; `stop()` gives the largest seen. */
export function sampleRss(pid: number, intervalMs = 100): { stop(): number } {
  let peak = rssBytes(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssBytes(pid));
    } catch {
      // the process ended: the test sees that on its own
    }
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}
