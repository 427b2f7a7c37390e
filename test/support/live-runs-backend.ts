/**
 * A stand-in backend whose runs run nothing: each stays live until its signal aborts (then ends
 * Cancelled) or, where the backend records runs beyond the process (`recorded`, as Kubernetes
 * does), until it is released (then its result rejects, as the Kubernetes backend's does; its
 * record answers it as Running). `started` shows what became of each run.
 */
import assert from 'node:assert/strict';
import { buildResult } from '../../src/api/result.js';
import type { RunResult } from '../../src/api/run.js';
import type { RunExecution, RunRecords, SandboxBackend } from '../../src/backends/types.js';
import type { EffectiveSpec } from '../../src/policy/evaluate.js';
import { AppError } from '../../src/shared/errors.js';
import { cancelledResult } from './cancelled-result.js';

/** A run as the backend was asked for it, and whether it was released. */
export interface Started {
  spec: EffectiveSpec;
  signal: AbortSignal;
  released: boolean;
}

export function liveRunsBackend(recorded: boolean): {
  backend: SandboxBackend;
  started: Map<string, Started>;
} {
  const started = new Map<string, Started>();
  const name = recorded ? 'kubernetes' : 'docker';
  const runs: RunRecords = {
    get: (runId) => {
      const run = started.get(runId);
      return Promise.resolve(run && runningResult(run.spec, runId));
    },
    cancel: () => assert.fail('nothing is cancelled through the record here'),
    tasks: () => Promise.resolve([]),
  };
  const backend: SandboxBackend = {
    name,
    start(spec, { runId, signal }): RunExecution {
      assert.ok(signal);
      const run: Started = { spec, signal, released: false };
      started.set(runId, run);
      let leftRunning!: (e: AppError) => void;
      const result = new Promise<RunResult>((resolve, reject) => {
        leftRunning = reject;
        signal.addEventListener('abort', () => resolve(cancelledResult(spec, runId, name)));
      });
      const release = (): void => {
        run.released = true;
        leftRunning(new AppError('ENGINE_UNAVAILABLE', `left ${runId} running`));
      };
      const settled = result.then(
        () => undefined,
        () => undefined,
      );
      return {
        runId,
        output: (async function* () {})(),
        result,
        cleanedUp: settled,
        ...(recorded ? { release } : {}),
      };
    },
    ...(recorded ? { runs } : {}),
    health: () => Promise.resolve({ ok: true, backend: name, detail: 'test' }),
    close: () => Promise.resolve(),
  };
  return { backend, started };
}

function runningResult(subject: EffectiveSpec, runId: string): RunResult {
  return buildResult({
    runId,
    subject,
    outcome: { phase: 'Running', exitCode: null },
    startedAt: 0,
    finishedAt: undefined,
    backend: 'kubernetes',
  });
}
