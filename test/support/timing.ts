/**
 * Timing bounds that hold on two loaded cores: a test's "within N ms" slack is stretched by how
 * slow this machine is right now, measured in the same run, instead of being fixed for an idle one.
 */
import { spawn } from 'node:child_process';
import type { SandboxBackend } from '../../src/backends/types.js';
import { spec } from './docker.js';

/** What the slack figures were written against, on an idle 2-core machine. */
const IDLE = { hostCommandMs: 4, coldRunMs: 300 };
/** However slow the machine, a bound stretches at most this much (it must still catch a hang). */
const MAX_STRETCH = 5;

/** Wall time of one trivial host command (`sh -c 'ls / > /dev/null'`). */
export function hostCommandMs(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('/bin/sh', ['-c', 'ls / > /dev/null'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => resolve(performance.now() - t0));
  });
}

async function median(n: number, sample: () => Promise<number>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) samples.push(await sample());
  samples.sort((a, b) => a - b);
  return samples[Math.floor(n / 2)]!;
}

const stretch = (measured: number, idle: number): number =>
  Math.min(MAX_STRETCH, Math.max(1, measured / idle));

/** How much slower than idle host commands run now (1 … MAX_STRETCH). */
export async function hostStretch(): Promise<number> {
  return stretch(await median(7, hostCommandMs), IDLE.hostCommandMs);
}

/** How much slower than idle the backend makes, runs and removes a trivial sandbox now (1 … MAX_STRETCH). */
export async function engineStretch(backend: SandboxBackend): Promise<number> {
  const coldRun = async (): Promise<number> => {
    const t0 = performance.now();
    const execution = backend.start(spec({ template: 'bash', code: 'true' }), {
      runId: `baseline-${Date.now()}`,
    });
    await execution.result;
    await execution.cleanedUp;
    return performance.now() - t0;
  };
  return stretch(await median(3, coldRun), IDLE.coldRunMs);
}
