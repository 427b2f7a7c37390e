/**
 * Cold runs: `sandpit run` through the Docker backend against the raw Engine API doing
 * create+start+wait+logs+remove of the same code with the same hardening, in one interleaved run.
 * Target: sandpit's p50 at most 1.15x raw.
 */
import { DockerBackend } from '../src/backends/docker/docker-backend.js';
import { requireDocker, runId, spec } from '../test/support/docker.js';
import { interleaved, report, target } from './stats.js';
import { rawRun } from './support/raw-engine.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
// Plain runc on both paths: the test cluster makes a wrapper the engine's default runtime.
const RUNTIME = process.env.BENCH_RUNTIME ?? 'runc';
const CODE = 'print(1)';

export default async function bench(): Promise<void> {
  const docker = await requireDocker();
  const backend = new DockerBackend({ docker });
  const s = spec({ template: 'python', code: CODE, runtime: RUNTIME }, { allowedRuntimes: [RUNTIME] });
  const series = await interleaved(ROUNDS, {
    'raw engine create+start+wait+logs+rm': () => rawRun(docker, RUNTIME, CODE),
    'sandpit cold run (result)': async () => {
      const r = await backend.start(s, { runId: runId('bench') }).result;
      if (r.stdout !== '1\n') throw new Error(`unexpected output ${r.stdout}`);
    },
    'sandpit cold run (result + removal)': async () => {
      const execution = backend.start(s, { runId: runId('bench') });
      await execution.result;
      await execution.cleanedUp;
    },
  });
  const rows = report(
    'cold run: sandpit vs raw Engine API (python print(1))',
    series,
    'raw engine create+start+wait+logs+rm',
  );
  const raw = rows[0]!.p50;
  const ours = rows[1]!.p50;
  target(
    'sandpit p50 <= 1.15x raw',
    ours <= raw * 1.15,
    `${(ours / raw).toFixed(2)}x (${ours.toFixed(0)} vs ${raw.toFixed(0)} ms)`,
  );
  await backend.close();
}
