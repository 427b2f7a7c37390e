// Not a test: measures apply → Succeeded for warm and cold runs in the same run (20 each, one at a
// time), and the warm serve's attach set-up apart from job → result (the operator's log).
//   node --import tsx test/integration/kubernetes/measure-warm.ts
import { withCluster } from '../../support/kube/index.js';
import {
  createRun,
  OperatorProcess,
  prepareNamespace,
  sandboxRun,
  waitForFinished,
} from './operator-harness.js';
import { createPool, createPoolPods } from './pool-pods.js';

const N = Number(process.env.N ?? 20);
const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

const cluster = await withCluster();
const ns = await cluster.createNamespace('measure-warm');
await prepareNamespace(cluster, ns);
const op = OperatorProcess.start(cluster, { namespace: ns, identity: 'measure' });
try {
  await op.waitForLog((l) => l.msg === 'Synced caches', 120_000, 'Synced caches');
  const pool = await createPool(cluster, ns, 'py');
  await createPoolPods(cluster, ns, pool, { template: 'python', code: 'pass' }, N);
  const timed = async (
    name: string,
    spec: Parameters<typeof sandboxRun>[1],
  ): Promise<{ ms: number; served: string }> => {
    const t0 = performance.now();
    await createRun(cluster, ns, sandboxRun(name, spec));
    const run = await waitForFinished(cluster, ns, name, 120_000);
    if (run.status?.phase !== 'Succeeded') throw new Error(`${name}: ${JSON.stringify(run.status)}`);
    return { ms: performance.now() - t0, served: run.status?.served ?? '?' };
  };
  const warm: number[] = [];
  const cold: number[] = [];
  for (let i = 0; i < N; i++) {
    const w = await timed(`w-${i}`, { template: 'python', code: `print(${i})` });
    if (w.served !== 'warm') throw new Error(`w-${i} was served ${w.served}`);
    warm.push(w.ms);
    const c = await timed(`c-${i}`, {
      template: 'python',
      code: `print(${i})`,
      resources: { memory: '96Mi' },
    });
    if (c.served !== 'cold') throw new Error(`c-${i} was served ${c.served}`);
    cold.push(c.ms);
  }
  const served = op.lines.filter((l) => l.msg === 'Served SandboxRun warm');
  const attach = served.map((l) => Number(l.attachMs));
  const job = served.map((l) => Number(l.jobToResultMs));
  console.log(
    JSON.stringify({
      runs: N,
      warmP50Ms: Math.round(p50(warm)),
      coldP50Ms: Math.round(p50(cold)),
      ratio: +(p50(cold) / p50(warm)).toFixed(1),
      attachSetupP50Ms: p50(attach),
      jobToResultP50Ms: p50(job),
      warmMs: warm.map(Math.round),
      coldMs: cold.map(Math.round),
    }),
  );
} finally {
  await op.stop(false);
  await cluster.deleteNamespace(ns);
}
