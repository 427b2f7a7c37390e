/** A started run as its caller holds it, and what the caller may ask of its start. */
import type { RunResult } from '../api/run.js';
import type { LiveChunk } from './live-output.js';

export interface RunHandle {
  runId: string;
  /** Resolves for every program outcome; rejects only when the run could not be carried out. */
  result: Promise<RunResult>;
  /** Call once the result is on its way to the caller: `get_run` keeps only a short tail from then on. */
  delivered(): void;
  /** Resolves once every gateway process can read the run (get_run on another replica), or it ended. */
  recorded: Promise<void>;
}

export interface StartRunOptions {
  /** Aborting cancels the run. */
  signal?: AbortSignal | undefined;
  /** Each piece of output as the program writes it (the head of each stream). */
  onOutput?: ((chunk: LiveChunk) => void) | undefined;
  /**
   * No call waits on this process for the run: it backs an MCP task (task id = run id), or is a
   * REST `?wait=false` run. Where the backend records runs beyond this process (Kubernetes), a
   * shutdown of the gateway leaves it running instead of cancelling it; its record answers for it.
   */
  detached?: boolean | undefined;
  /**
   * The run backs an MCP task (and so is detached): where the backend records runs, every gateway
   * process lists it (tasks/list).
   */
  task?: boolean | undefined;
}
