/**
 * What a hostile case checks from outside the sandbox, after (or while) a program ran: that the
 * target left nothing behind, which host processes carry a marker the program put in their argv,
 * that the gateway still answers, and how far the test process's memory grew meanwhile.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { Untrusted } from './untrusted.js';

/** How long a target may take to remove a sandbox after its result. */
export const LEFTOVERS_MS = 30_000;

/** This target's sandboxes that are still there `ms` after asking (none, once they are gone). */
export async function leftoversAfter(target: Untrusted, ms = LEFTOVERS_MS): Promise<string[]> {
  const deadline = Date.now() + ms;
  let left = await target.leftovers();
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    left = await target.leftovers();
  }
  return left;
}

/** Host processes (pid and argv) with `marker` in their argv: under runc a sandbox's processes are the host's. */
export function hostProcesses(marker: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let argv: string;
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    if (argv.includes(marker)) found.push(`${pid}: ${argv.split('\0').join(' ').trim()}`);
  }
  return found;
}

/** Calls `probe` every `everyMs` until stop(): what it returned, each time. */
export function watch<T>(probe: () => T, everyMs = 50): { stop(): T[] } {
  const seen: T[] = [probe()];
  const timer = setInterval(() => seen.push(probe()), everyMs);
  return {
    stop() {
      clearInterval(timer);
      seen.push(probe());
      return seen;
    },
  };
}

/** The test process's resident memory, sampled while `work` runs: how far above its start it peaked. */
export async function rssGrowth<T>(work: () => Promise<T>): Promise<{ value: T; growthBytes: number }> {
  const before = process.memoryUsage().rss;
  const samples = watch(() => process.memoryUsage().rss, 20);
  try {
    const value = await work();
    return { value, growthBytes: Math.max(...samples.stop()) - before };
  } finally {
    samples.stop();
  }
}

/** Whether the gateway's service still answers its health check, and what it said. */
export async function gatewayHealth(target: Untrusted): Promise<{ ok: boolean; detail: string }> {
  const h = await target.service.health();
  return { ok: h.ok, detail: h.detail };
}
