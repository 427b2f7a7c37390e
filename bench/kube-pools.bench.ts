/**
 * Warm pools on Kubernetes (issue 16), in one run on the test cluster (test/env/kube-cluster.sh),
 * through the real operator (`sandpit operator`, its own RBAC identity) and the gateway's
 * Kubernetes backend (the gateway's RBAC identity) behind an in-process MCP HTTP gateway:
 *   - run_code of python `print(1)` over MCP HTTP, warm (a SandboxPool of the gateway's default
 *     shape) and cold (a shape no pool serves), against the same hardened pod applied raw (the cold
 *     run's own pod spec, no operator) until Succeeded, and against the Docker warm path (the
 *     Docker backend with pools, over MCP HTTP too). Targets: warm p50 <= 100 ms (stretch 50 ms),
 *     and at least 10x faster than cold. Each sample waits for the last one's pods to be gone and
 *     both pools to be full again, then BENCH_SETTLE_MS; the paths' order changes from round to
 *     round (stats.roundOrder), so that no path always follows the same one.
 *   - an idle pool pod attached to by the bench itself: the attach set-up timed apart from job →
 *     result (write the job, read until the runner's exit trailer). The operator sets its attach
 *     up ahead, off the run's path: it says how many serves wrote the job on one.
 *   - the pool's refill rate: pods ready per second after deleting its idle pods.
 *   - the memory one idle pool pod costs: its cgroup's usage, from the kubelet's stats/summary
 *     (through the API server, to the kubelet on loopback) and from the host's memory cgroup.
 */
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { RunRequestSchema } from '../src/api/run.js';
import { LABEL_POOL, SANDBOX_CONTAINER, labelValueFor } from '../src/api/v1alpha1/labels.js';
import { loadContext, wireDocker } from '../src/cmd/wiring.js';
import { evaluate, type EffectiveSpec } from '../src/policy/evaluate.js';
import { parseTrailer } from '../src/runner/exit-trailer.js';
import { encodeJob, newChannelKey } from '../src/runner/protocol.js';
import { bindGatewayRbac, gatewayBackend } from '../test/contract/kube-gateway.js';
import {
  CONTRACT_SANDBOX_CONFIG,
  contractPolicy,
  CountingBackend,
  createService,
} from '../test/contract/target.js';
import { getRun, startSuite, stopSuite } from '../test/integration/kubernetes/operator-harness.js';
import {
  createPool,
  isIdlePoolPod,
  podMemory,
  poolSpecFor,
  sandboxPods,
  waitPods,
  waitPoolReady,
} from '../test/integration/kubernetes/pool-harness.js';
import { requireDocker, sandpitContainers } from '../test/support/docker.js';
import { attachToPod, withCluster, type KubeCluster } from '../test/support/kube/index.js';
import { waitFor } from '../test/support/kube/wait.js';
import { pollUntil } from '../src/shared/time.js';
import { interleaved, percentile, report, target } from './stats.js';
import { runCode, startHttpGateway } from './support/mcp-http.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
const ATTACH_ROUNDS = Number(process.env.BENCH_ATTACH_ROUNDS ?? 10);
const POOL = 'bench';
const POOL_SIZE = Number(process.env.BENCH_POOL_SIZE ?? 4);
const CODE = 'print(1)';
const WARM = { language: 'python', code: CODE };
// 8 MiB less memory than the policy's default: a shape no pool serves.
const COLD = { language: 'python', code: CODE, resources: { memory: '504Mi' } };
const WAIT_MS = 180_000;
const IDLE_BEFORE_MEMORY_MS = 15_000;
// A pause before each sample (an agent's think time, as in mcp.bench.ts), once no pod of the last
// sample is being torn down: on two cores the kubelet's teardown would otherwise land in the next.
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 500);
// eslint-disable-next-line no-control-regex -- RS starts the runner's trailer line
const TRAILER_LINE = /\n\x1esandpit-exit [0-9a-f]{32} \{[^\n]*\}\n$/;

function effective(request: Record<string, unknown>): EffectiveSpec {
  const { language, ...rest } = request;
  const e = evaluate(RunRequestSchema.parse({ template: language, ...rest }), contractPolicy([]));
  assert.ok(e.ok, JSON.stringify(e));
  return e.spec;
}

/**
 * The cold run's pod as a plain pod template: no owner, no operator labels, and its ConfigMaps
 * (the job) copied once under names of its own, which outlive the run's (its TTL ends them).
 */
async function rawTemplate(cluster: KubeCluster, ns: string, podName: string): Promise<V1Pod> {
  const pod = await cluster.core.readNamespacedPod({ namespace: ns, name: podName });
  if (!pod.spec) throw new Error(`pod ${podName} has no spec`);
  const volumes = await Promise.all(
    (pod.spec.volumes ?? []).map(async (v) => {
      if (!v.configMap?.name) return v;
      const name = `raw-${process.pid}-${v.name}`;
      const { data, binaryData } = await cluster.core.readNamespacedConfigMap({
        namespace: ns,
        name: v.configMap.name,
      });
      await cluster.core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name }, data, binaryData },
      });
      return { ...v, configMap: { ...v.configMap, name } };
    }),
  );
  return { metadata: { namespace: ns }, spec: { ...pod.spec, volumes, nodeName: undefined } };
}

async function rawPodToSucceeded(
  cluster: KubeCluster,
  ns: string,
  template: V1Pod,
  i: number,
): Promise<void> {
  const name = `raw-${process.pid}-${i}`;
  const done = waitFor<V1Pod>(
    cluster.kc,
    { path: `/api/v1/namespaces/${ns}/pods`, name },
    (p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed',
    { timeoutMs: WAIT_MS, description: `raw pod ${name} to end` },
  );
  await cluster.core.createNamespacedPod({
    namespace: ns,
    body: { ...template, metadata: { ...template.metadata, name } },
  });
  const pod = await done;
  if (pod.status?.phase !== 'Succeeded') throw new Error(`raw pod ${name}: ${pod.status?.phase}`);
  void cluster.core
    .deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 })
    .catch(() => undefined);
}

/** An idle, ready pod of the pool that is not in `used` (waits for one). */
async function idlePod(cluster: KubeCluster, ns: string, used: ReadonlySet<string>): Promise<V1Pod> {
  const fresh = (p: V1Pod): boolean => isIdlePoolPod(POOL)(p) && !used.has(p.metadata?.name ?? '');
  const pods = await waitPods(cluster, ns, (ps) => ps.some(fresh), WAIT_MS, 'an idle pool pod');
  return pods.find(fresh)!;
}

/** Attaches to an idle pool pod, writes one job, reads until its exit trailer: the two times apart. */
async function attachAndRun(
  cluster: KubeCluster,
  ns: string,
  pod: string,
  spec: EffectiveSpec,
): Promise<{ attachMs: number; jobMs: number }> {
  const key = newChannelKey();
  const t0 = performance.now();
  // stdout and stderr both, as the operator's attach has them.
  const attached = await attachToPod(cluster.kc, ns, pod, SANDBOX_CONTAINER);
  const t1 = performance.now();
  try {
    // The test operators declare NetworkPolicy enforced, so their jobs skip the runner's own check too.
    attached.write(encodeJob(spec, { key, requireNoNetwork: false }));
    const text = await attached.readUntil(TRAILER_LINE, WAIT_MS);
    const jobMs = performance.now() - t1;
    const at = text.lastIndexOf('\n\x1esandpit-exit ');
    const end = parseTrailer(Buffer.from(text.slice(at)), key);
    if (end?.kind !== 'exit' || end.report.exitCode !== 0 || text.slice(0, at) !== '1\n')
      throw new Error(`pod ${pod} ended the job with ${JSON.stringify(end)}: ${JSON.stringify(text)}`);
    return { attachMs: t1 - t0, jobMs };
  } finally {
    attached.close();
  }
}

export default async function main(): Promise<void> {
  const cluster = await withCluster();
  const suite = await startSuite(cluster, 'bench-pools', { sandbox: CONTRACT_SANDBOX_CONFIG });
  const { ns } = suite;
  await bindGatewayRbac(cluster, ns);
  const kube = gatewayBackend(cluster, ns);
  const kubeService = createService(new CountingBackend(kube), contractPolicy([]));
  const kubeGateway = await startHttpGateway(kubeService);

  const engine = await requireDocker();
  process.env.SANDPIT_SANDBOX_RUNTIME = process.env.BENCH_RUNTIME ?? 'runc';
  process.env.SANDPIT_POOL_PREWARM = 'python';
  process.env.SANDPIT_POOL_MIN_IDLE = '4';
  const docker = await wireDocker(loadContext({ logLevel: 'warn' }));
  await docker.backend.pool?.filled(60_000);
  const dockerGateway = await startHttpGateway(docker.service);
  let failed = false;
  try {
    const warmSpec = effective(WARM);
    await createPool(cluster, ns, POOL, poolSpecFor(warmSpec, { replicas: POOL_SIZE }));
    await waitPoolReady(cluster, ns, POOL, POOL_SIZE, WAIT_MS);
    const kubeClient: Client = await kubeGateway.connect();
    const dockerClient: Client = await dockerGateway.connect();

    // The raw pod: the cold path's own pod, copied.
    const cold = await runCode(kubeClient, COLD);
    assert.equal(cold.served, 'cold');
    const coldPod = (await getRun(cluster, ns, String(cold.runId)))?.status?.podName;
    assert.ok(coldPod, 'the cold run names its pod');
    const template = await rawTemplate(cluster, ns, coldPod);
    let raws = 0;

    const check = (r: Record<string, unknown>, served: string, what: string): void => {
      if (r.stdout !== '1\n' || r.exitCode !== 0) throw new Error(`${what} printed ${JSON.stringify(r)}`);
      if (r.served !== served) throw new Error(`${what} was served ${String(r.served)}, not ${served}`);
    };
    const names = {
      warm: 'kubernetes run_code over MCP HTTP, warm',
      cold: 'kubernetes run_code over MCP HTTP, cold',
      raw: 'raw pod apply → Succeeded',
      docker: 'docker run_code over MCP HTTP, warm',
    };
    const settle = async (): Promise<void> => {
      await waitPods(
        cluster,
        ns,
        (ps) => !ps.some((p) => p.metadata?.deletionTimestamp),
        WAIT_MS,
        "the last sample's pods to be gone",
      );
      // Both pools full again, and the last Docker run's container removed: no refill or removal
      // of an earlier sample's runs in the next.
      await waitPoolReady(cluster, ns, POOL, POOL_SIZE, WAIT_MS);
      await docker.backend.pool?.filled(60_000);
      const removed = await pollUntil(
        async () => !(await sandpitContainers(engine)).some((c) => c.startsWith('/sandpit-run-')),
        { intervalMs: 20, timeoutMs: WAIT_MS },
      );
      if (!removed) throw new Error("the last Docker run's container was not removed");
      await new Promise((r) => setTimeout(r, SETTLE_MS));
    };
    const series = await interleaved(
      ROUNDS,
      {
        // settle() has both pools full before each sample.
        [names.warm]: async () => check(await runCode(kubeClient, WARM), 'warm', names.warm),
        [names.cold]: async () => check(await runCode(kubeClient, COLD), 'cold', names.cold),
        [names.raw]: () => rawPodToSucceeded(cluster, ns, template, raws++),
        [names.docker]: async () => check(await runCode(dockerClient, WARM), 'warm', names.docker),
      },
      2,
      settle,
    );
    const rows = report('kubernetes warm pools: run_code of python print(1)', series, names.raw);
    const [warm, coldRow, raw, dockerRow] = [rows[0]!, rows[1]!, rows[2]!, rows[3]!];
    target('warm p50 <= 100 ms through the gateway', warm.p50 <= 100, `${warm.p50.toFixed(1)} ms`);
    target('stretch: warm p50 <= 50 ms', warm.p50 <= 50, `${warm.p50.toFixed(1)} ms`);
    target(
      'warm >= 10x faster than cold (same run)',
      coldRow.p50 / warm.p50 >= 10,
      `${(coldRow.p50 / warm.p50).toFixed(1)}x (${warm.p50.toFixed(1)} vs ${coldRow.p50.toFixed(1)} ms; raw pod ${raw.p50.toFixed(1)} ms)`,
    );
    console.log(
      `warm on kubernetes vs the docker warm path: ${(warm.p50 / dockerRow.p50).toFixed(2)}x (${warm.p50.toFixed(1)} vs ${dockerRow.p50.toFixed(1)} ms)`,
    );
    // The operator's own account of its warm serves: the attach held ahead, and job → result.
    const served = suite.operator.lines.filter((l) => l.msg === 'Served SandboxRun warm');
    const ahead = served.filter((l) => l.attachedAhead === true).length;
    const jobMs = served.map((l) => Number(l.jobToResultMs)).filter(Number.isFinite);
    console.log(
      `operator: ${ahead} of ${served.length} warm serves wrote the job on an attach held ahead; ` +
        `job written → exit trailer p50 ${percentile(jobMs, 50).toFixed(1)} ms`,
    );

    // The attach, made by the bench to an idle pool pod, timed apart from the job.
    await waitPoolReady(cluster, ns, POOL, POOL_SIZE, WAIT_MS);
    const attach: number[] = [];
    const job: number[] = [];
    const failures: string[] = [];
    const used = new Set<string>();
    for (let i = 0; i < ATTACH_ROUNDS && failures.length < 3; i++) {
      // A pod the bench gave a job keeps its idle label until its runner exits: never twice.
      const name = (await idlePod(cluster, ns, used)).metadata!.name!;
      used.add(name);
      try {
        const t = await attachAndRun(cluster, ns, name, warmSpec);
        attach.push(t.attachMs);
        job.push(t.jobMs);
      } catch (e) {
        // Why the runner ended, from its termination message, once the kubelet has it.
        const ended = await waitPods(
          cluster,
          ns,
          (ps) =>
            !ps.some(
              (p) => p.metadata?.name === name && !p.status?.containerStatuses?.[0]?.state?.terminated,
            ),
          30_000,
          `pod ${name} to end`,
        ).catch(() => []);
        const state = ended.find((p) => p.metadata?.name === name)?.status?.containerStatuses?.[0]?.state;
        failures.push(`${(e as Error).message}; the pod's container: ${JSON.stringify(state)}`);
      }
    }
    for (const f of failures) console.log(`attach round failed: ${f}`);
    report(
      'an idle pool pod, attached to by the bench: set-up and job → result apart',
      [
        { name: 'attach set-up (pods/attach open)', samples: attach },
        { name: 'job written → exit trailer read', samples: job },
        { name: 'the two together', samples: attach.map((a, i) => a + job[i]!) },
      ],
      'the two together',
    );

    // Refill: delete the pool's idle pods, time until as many are ready again.
    await waitPoolReady(cluster, ns, POOL, POOL_SIZE, WAIT_MS);
    // A pod just made ready may still be starting its preloaded python, and the kubelet has no
    // stats for it before its next housekeeping: the pods are read once they have idled a while.
    await new Promise((r) => setTimeout(r, IDLE_BEFORE_MEMORY_MS));
    const idle = (await sandboxPods(cluster, ns)).filter(isIdlePoolPod(POOL));
    const memory = await podMemory(
      cluster,
      idle.map((p) => p.metadata!.uid!),
    );
    const mib = (xs: (number | undefined)[]): string => {
      const known = xs.filter((x): x is number => x !== undefined);
      return known.length
        ? `${(percentile(known, 50) / 1024 ** 2).toFixed(1)} MiB (median of ${known.length})`
        : 'not available';
    };
    console.log(
      `\n## memory of one idle pool pod: kubelet stats/summary ${mib([...memory.values()].map((m) => m.kubelet))}, ` +
        `host memory cgroup ${mib([...memory.values()].map((m) => m.cgroup))}`,
    );
    const gone = new Set(idle.map((p) => p.metadata!.name!));
    const t0 = performance.now();
    await Promise.all(
      idle.map((p) =>
        cluster.core.deleteNamespacedPod({ namespace: ns, name: p.metadata!.name!, gracePeriodSeconds: 0 }),
      ),
    );
    await waitPods(
      cluster,
      ns,
      (ps) =>
        ps.filter((p) => isIdlePoolPod(POOL)(p) && !gone.has(p.metadata?.name ?? '')).length >= idle.length,
      WAIT_MS,
      `${idle.length} new idle pool pods`,
    );
    const seconds = (performance.now() - t0) / 1000;
    console.log(
      `## refill: ${idle.length} idle pods deleted → ${idle.length} new ones ready in ${seconds.toFixed(1)} s: ${(idle.length / seconds).toFixed(2)} pods/s`,
    );
    const pods = (await sandboxPods(cluster, ns)).filter(
      (p) => p.metadata?.labels?.[LABEL_POOL] === labelValueFor(POOL),
    );
    console.log(`(pool pods now: ${pods.length})`);
  } catch (e) {
    failed = true;
    throw e;
  } finally {
    await kubeGateway.close();
    await dockerGateway.close();
    // Each service closes its backend.
    await kubeService.shutdown();
    await docker.service.shutdown();
    await stopSuite(suite, failed, (l) => console.error(l));
  }
}
