/**
 * Hostile targets on the Kubernetes backend: SandboxRuns and Sandboxes reconciled by one real
 * operator suite (its own namespace), made through the gateway's service as the static gateway
 * identity (deploy/gateway-rbac.yaml, never admin). A warm configuration gets a SandboxPool of one
 * pod of its shape (runs: the shape the gateway writes; sessions: the template's), and each of its
 * runs waits until the pool has a ready pod.
 */
import {
  LABEL_POOL_POD,
  LABEL_RUN,
  LABEL_SESSION,
  POOL_POD_IDLE,
  labelValueFor,
} from '../../src/api/v1alpha1/labels.js';
import type { KubernetesBackend } from '../../src/backends/kubernetes/kubernetes-backend.js';
import type { SandpitService } from '../../src/gateway/service.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { isTerminal } from '../../src/api/run.js';
import { bindGatewayRbac, gatewayBackend } from '../contract/kube-gateway.js';
import { CountingBackend, createService } from '../contract/target.js';
import { getRun, startSuite, stopSuite, type Suite } from '../integration/kubernetes/operator-harness.js';
import {
  createPool,
  isIdlePoolPod,
  poolSpecFor,
  sandboxPods,
  waitPods,
} from '../integration/kubernetes/pool-harness.js';
import { getSandbox } from '../integration/kubernetes/sandbox-harness.js';
import type { OperatorConfig } from '../integration/kubernetes/operator-process.js';
import { specWith } from '../support/docker.js';
import { withCluster } from '../support/kube/index.js';
import { HOSTILE_SANDBOX_CONFIG, hostilePolicy, serviceTarget } from './service-target.js';
import type { HostileConfig, Targets, Untrusted } from './untrusted.js';

/** The RuntimeClass test/env/kube-cluster.sh installs (deploy/runtimeclasses.yaml, handler runsc). */
const GVISOR = 'gvisor';

interface Host {
  suite: Suite;
  backend: KubernetesBackend;
  service: SandpitService;
  metrics: Metrics;
}

/** `operator`: more of the operator's config (e.g. a leak case's canary). */
export function kubernetesTargets(operator: Omit<OperatorConfig, 'namespace'> = {}): Targets {
  const policy = hostilePolicy([GVISOR]);
  let host: Promise<Host> | undefined;
  const pools = new Set<string>();

  const start = (): Promise<Host> =>
    (host ??= (async () => {
      const suite = await startSuite(await withCluster(), 'hostile', {
        ...operator,
        sandbox: { ...HOSTILE_SANDBOX_CONFIG, ...operator.sandbox },
        kubernetes: { allowedRuntimeClasses: [GVISOR], ...operator.kubernetes },
      });
      await bindGatewayRbac(suite.cluster, suite.ns);
      const backend = gatewayBackend(suite.cluster, suite.ns, { policy });
      const metrics = createMetrics();
      return {
        suite,
        backend,
        metrics,
        service: createService(new CountingBackend(backend), policy, metrics),
      };
    })());

  return {
    async target(config: HostileConfig): Promise<Untrusted> {
      const { suite, service, metrics } = await start();
      const { cluster, ns } = suite;
      const runtime = config.gvisor ? { runtime: GVISOR } : {};
      let ready: (() => Promise<void>) | undefined;
      if (config.warm) {
        const name = `${config.path}-${config.gvisor ? 'gvisor' : 'runc'}`;
        if (!pools.has(name)) {
          pools.add(name);
          await createPool(
            cluster,
            ns,
            name,
            config.path === 'run'
              ? poolSpecFor(specWith({ template: 'python', code: '', ...runtime }, policy), { replicas: 1 })
              : {
                  template: 'python',
                  mode: 'session',
                  replicas: 1,
                  ...(config.gvisor ? { runtimeClassName: GVISOR } : {}),
                },
          );
        }
        ready = async () => {
          await waitPods(
            cluster,
            ns,
            (pods) => pods.some(isIdlePoolPod(name)),
            180_000,
            `a ready pod of pool ${name}`,
          );
        };
        await ready();
      }
      return serviceTarget({
        config,
        service,
        metrics,
        gvisorRuntime: GVISOR,
        ...(ready ? { ready } : {}),
        async leftovers(made) {
          const runs = new Set(made.runs.map(labelValueFor));
          const sessions = new Set(made.sessions.map(labelValueFor));
          // A finished cold run keeps its pod, stopped, as its record until the run's TTL (its
          // `kubectl logs`): a pod that is not finished still holds a sandbox.
          const pods = (await sandboxPods(cluster, ns))
            .filter((p) => p.metadata?.labels?.[LABEL_POOL_POD] !== POOL_POD_IDLE)
            .filter((p) => !['Succeeded', 'Failed'].includes(p.status?.phase ?? ''))
            .filter(
              (p) =>
                runs.has(p.metadata?.labels?.[LABEL_RUN] ?? '') ||
                sessions.has(p.metadata?.labels?.[LABEL_SESSION] ?? ''),
            )
            .map((p) => `pod ${p.metadata?.name} (${p.status?.phase})`);
          // A finished SandboxRun is the run's record (kept until its TTL); an unfinished one is a live sandbox.
          const live: string[] = [];
          for (const id of made.runs) {
            const run = await getRun(cluster, ns, id);
            const phase = run?.status?.phase;
            if (run && (!phase || !isTerminal(phase))) live.push(`SandboxRun ${id} (${phase ?? 'no phase'})`);
          }
          for (const id of made.sessions) if (await getSandbox(cluster, ns, id)) live.push(`Sandbox ${id}`);
          return [...pods, ...live];
        },
      });
    },
    async close() {
      if (!host) return;
      const h = await host;
      await h.service.shutdown({ endSessions: true });
      await stopSuite(h.suite, false, (l) => process.stderr.write(`# ${l}\n`));
    },
  };
}
