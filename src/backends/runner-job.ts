/**
 * One job on a sandbox whose main process is sandpit-runner, whatever engine made the sandbox
 * (Docker's attached container, the OCI backend's runtime process): wait for the runner, send the
 * job with a fresh channel key, take the result in-band, and enforce the deadline from outside
 * too. The engine supplies the channel, the kill, and how a run ended that the runner never
 * reported (OOM of the whole sandbox, a kill).
 */
import { CANCELLED_FACTS, failedFacts, type RunFacts } from '../api/outcome.js';
import type { EffectiveSpec } from '../policy/evaluate.js';
import type { OutputChunk } from '../runner/capture.js';
import {
  EGRESS_PROTOCOL_VERSION,
  encodeJob,
  newChannelKey,
  OUTPUTS_PROTOCOL_VERSION,
  outputWindow,
} from '../runner/protocol.js';
import { checkRunnerVersion, type RunnerOutcome, type RunnerReader } from '../runner/reader.js';
import { onAbort } from '../shared/abort.js';
import { AppError } from '../shared/errors.js';

/** How long after the runner's own deadline the engine kills the sandbox from outside. */
export const OUTER_DEADLINE_GRACE_MS = 1000;

export interface JobResult {
  outcome: RunnerOutcome;
  facts: RunFacts;
}

/** A sandbox whose runner takes one job. */
export interface RunnerSandbox {
  readonly reader: RunnerReader;
  /** The image, for the error that names an outdated runner. */
  readonly image: string;
  /** Resolves when the runner's channel closes (it exited, or the sandbox was killed). */
  readonly ended: Promise<void>;
  /**
   * Where the egress proxy's socket is inside the sandbox, once its gate is bound to the run; a
   * job with an allowlist needs it.
   */
  readonly egressSocket?: string | undefined;
  /** Writes to the runner's stdin; resolves once taken. */
  write(parts: readonly Buffer[]): Promise<void>;
  /** Kills the sandbox; never throws. */
  kill(): Promise<void>;
  /** How the sandbox ended, from the engine, when the runner reported nothing (`deadline`: the outer kill ended it). */
  endWithoutReport(deadline: boolean): Promise<RunFacts>;
}

/**
 * The runner's protocol version once it waits for its job, undefined when its sandbox ended first;
 * throws IMAGE_OUTDATED when the image's runner is older than this code's protocol.
 */
export async function runnerReady(sandbox: RunnerSandbox): Promise<number | undefined> {
  const version = await Promise.race([sandbox.reader.ready, sandbox.ended.then(() => undefined)]);
  if (version !== undefined) checkRunnerVersion(version, sandbox.image);
  return version;
}

/** Refuses a job that needs more of its runner (output files, egress) than the sandbox's has. */
function checkJobNeeds(sandbox: RunnerSandbox, version: number, spec: EffectiveSpec): void {
  if (spec.outputs.entries.length > 0)
    checkRunnerVersion(version, sandbox.image, {
      version: OUTPUTS_PROTOCOL_VERSION,
      what: 'returning output files',
    });
  if (spec.network.egress !== 'allowlist') return;
  checkRunnerVersion(version, sandbox.image, { version: EGRESS_PROTOCOL_VERSION, what: 'egress' });
  if (!sandbox.egressSocket)
    throw new AppError(
      'UNSUPPORTED',
      'this sandbox has no way to the egress proxy, so it may not have an allowlist',
    );
}

/** Runs the one job. Deadline: the runner's own, and the engine's kill OUTER_DEADLINE_GRACE_MS later. */
export async function runJob(
  sandbox: RunnerSandbox,
  spec: EffectiveSpec,
  onChunk: (c: OutputChunk) => void,
  signal?: AbortSignal,
): Promise<JobResult> {
  const version = await runnerReady(sandbox);
  if (version !== undefined) checkJobNeeds(sandbox, version, spec);
  const outputs = spec.outputs.entries.length > 0;
  const key = newChannelKey();
  sandbox.reader.begin(
    outputWindow(spec.limits.outputBytes),
    key,
    onChunk,
    outputs ? spec.outputs.caps : undefined,
  );
  let killedBy: 'deadline' | 'cancel' | undefined;
  const kill = (why: 'deadline' | 'cancel'): void => {
    killedBy ??= why;
    void sandbox.kill();
  };
  const timer = setTimeout(
    () => kill('deadline'),
    spec.limits.timeoutSeconds * 1000 + OUTER_DEADLINE_GRACE_MS,
  );
  const detach = onAbort(signal, () => kill('cancel'));
  try {
    const egressSocket = spec.network.egress === 'allowlist' ? sandbox.egressSocket : undefined;
    sandbox.write([encodeJob(spec, { key, egressSocket })]).catch(() => {});
    await Promise.race([sandbox.reader.done, sandbox.ended]);
  } finally {
    clearTimeout(timer);
    detach();
  }
  const outcome = sandbox.reader.outcome();
  if (killedBy === 'cancel') return { outcome, facts: CANCELLED_FACTS };
  if (outcome.exit) {
    const { exitCode, timedOut, oomKilled } = outcome.exit;
    return { outcome, facts: { exitCode, timedOut, oomKilled, cancelled: false } };
  }
  if (outcome.failure !== undefined) return { outcome, facts: failedFacts(outcome.failure) };
  return { outcome, facts: await sandbox.endWithoutReport(killedBy === 'deadline') };
}
