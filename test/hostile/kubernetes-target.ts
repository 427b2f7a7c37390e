/**
 * Hostile targets on the Kubernetes backend: SandboxRuns and Sandboxes reconciled by one real
 * operator (one per test file), made through a gateway wired as `sandpit serve` wires it
 * (test/hostile/gateway.ts) with the static gateway identity's kubeconfig (deploy/gateway-rbac.yaml,
 * never admin). The operator watches two namespaces: cold configurations run in one that has no
 * pools, so nothing can serve them warm; warm ones in the other, as a tenant token's runs
 * (auth.tokens[].namespace), where each warm configuration has a SandboxPool of one pod of its
 * shape (runs: the shape the gateway writes; sessions: the template's), all made at the start so
 * that they fill together. Besides the gateway's canary, the cluster's credentials are secrets no
 * sandbox may see: the gateway's, the operator's and the admin's tokens.
 */
import {
  LABEL_POOL_POD,
  LABEL_RUN,
  LABEL_SESSION,
  POOL_POD_IDLE,
  labelValueFor,
} from '../../src/api/v1alpha1/labels.js';
import { isTerminal } from '../../src/api/run.js';
import type { SandboxPool } from '../../src/api/v1alpha1/sandboxpool.js';
import type { BackendWiring } from '../../src/cmd/wiring.js';
import { bindGatewayRbac } from '../contract/kube-gateway.js';
import { PRINCIPAL } from '../contract/target.js';
import {
  getRun,
  OperatorProcess,
  prepareNamespace,
  stopSuite,
  type Suite,
} from '../integration/kubernetes/operator-harness.js';
import type { OperatorConfig } from '../integration/kubernetes/operator-process.js';
import { createPool, poolsPath, poolSpecFor, sandboxPods } from '../integration/kubernetes/pool-harness.js';
import { getSandbox } from '../integration/kubernetes/sandbox-harness.js';
import { isSessionEnded } from '../../src/api/session.js';
import { specWith } from '../support/docker.js';
import { withCluster } from '../support/kube/index.js';
import { armCanary, CANARY, GATEWAY_SECRETS, HOSTILE_SANDBOX_CONFIG, wireGateway } from './gateway.js';
import { serviceTarget } from './service-target.js';
import type { HostileConfig, Targets, Untrusted } from './untrusted.js';

/** The RuntimeClass test/env/kube-cluster.sh installs (deploy/runtimeclasses.yaml, handler runsc). */
const GVISOR = 'gvisor';

interface Host extends BackendWiring {
  suite: Suite;
  /** Where the pools are, and the warm configurations' runs and sessions. */
  warmNs: string;
  secrets: Record<string, string>;
}

const poolName = (c: HostileConfig): string => `${c.path}-${c.gvisor ? 'gvisor' : 'runc'}`;

/**
 * `configs`: the configurations this file tries (their pools are made at the start);
 * `operator`: more of the operator's config.
 */
export function kubernetesTargets(
  configs: readonly HostileConfig[],
  operator: Omit<OperatorConfig, 'namespace'> = {},
): Targets {
  let host: Promise<Host> | undefined;
  /** When the last run began from each pool (the targets of one configuration share it). */
  const lastStart = new Map<string, number>();

  const start = (): Promise<Host> =>
    (host ??= (async () => {
      armCanary();
      const cluster = await withCluster();
      const ns = await cluster.createNamespace('hostile');
      const warmNs = await cluster.createNamespace('hostile-warm');
      await prepareNamespace(cluster, ns);
      const op = OperatorProcess.start(cluster, {
        ...operator,
        namespace: ns,
        operator: { namespaces: [ns, warmNs], ...operator.operator },
        // The operator holds the canary too: in its config file, and (inherited) in its env.
        auth: { token: CANARY },
        sandbox: { ...HOSTILE_SANDBOX_CONFIG, ...operator.sandbox },
        kubernetes: { allowedRuntimeClasses: [GVISOR], ...operator.kubernetes },
      });
      const suite: Suite = { cluster, ns, operator: op };
      try {
        await op.waitForLog((l) => l.msg === 'Synced caches', 30_000, 'Synced caches');
      } catch (e) {
        await stopSuite(suite, true, (l) => process.stderr.write(`# ${l}\n`));
        await cluster.deleteNamespace(warmNs);
        throw e;
      }
      await bindGatewayRbac(cluster, ns);
      await bindGatewayRbac(cluster, warmNs);
      const wired = await wireGateway({
        sandbox: { backend: 'kubernetes', ...HOSTILE_SANDBOX_CONFIG },
        auth: { tokens: [{ name: 'hostile-warm', token: `${CANARY}-warm`, namespace: warmNs }] },
        kubernetes: {
          allowedRuntimeClasses: [GVISOR],
          gateway: { kubeconfig: cluster.env.identities.gateway.kubeconfigPath, namespace: ns },
          operator: { leaseNamespace: ns },
        },
      });
      const policy = wired.service.policy;
      for (const c of configs.filter((x) => x.warm)) {
        const runtime = c.gvisor ? { runtime: GVISOR } : {};
        await createPool(
          cluster,
          warmNs,
          poolName(c),
          c.path === 'run'
            ? poolSpecFor(specWith({ template: 'python', code: '', ...runtime }, policy), { replicas: 1 })
            : {
                template: 'python',
                mode: 'session',
                replicas: 1,
                ...(c.gvisor ? { runtimeClassName: GVISOR } : {}),
              },
        );
      }
      const ids = cluster.env.identities;
      const secrets = {
        ...GATEWAY_SECRETS,
        'the gateway’s cluster token (its kubeconfig)': ids.gateway.token,
        'the operator’s cluster token': ids.operator.token,
        'the cluster admin’s token': ids.admin.token,
      };
      return { ...wired, suite, warmNs, secrets };
    })());

  return {
    async target(config: HostileConfig): Promise<Untrusted> {
      const { suite, warmNs, service, metrics, secrets } = await start();
      const { cluster } = suite;
      const ns = config.warm ? warmNs : suite.ns;
      let ready: (() => Promise<void>) | undefined;
      if (config.warm) {
        const name = poolName(config);
        // Ready when the operator's own view says so: its pool's Ready condition (written from
        // the cache a claim reads; True when every wanted pod is ready and none starting) turned
        // True after the last run here began. With one replica that run's claim turned it False
        // (no ready pod until the refill): so it is the refill's pod that the next run finds. A
        // pod this test's own watch sees ready may not be in the operator's cache yet (the run
        // would go cold), and the old True is stale. The condition's time has milliseconds (the
        // operator's ISO time, kept as written in a custom resource): a True from earlier in the
        // same second is the stale one, still there for the 200 ms the pool gathers its pods'
        // changes after the claim before it writes False.
        ready = async () => {
          const after = lastStart.get(name) ?? 0;
          await cluster.waitFor<SandboxPool>(
            { path: poolsPath(ns), name },
            (p) => {
              const c = p.status?.conditions?.find((x) => x.type === 'Ready');
              return c?.status === 'True' && Date.parse(c.lastTransitionTime ?? '') > after;
            },
            { timeoutMs: 180_000, description: `SandboxPool ${ns}/${name} to be ready again` },
          );
          lastStart.set(name, Date.now());
        };
      }
      return serviceTarget({
        config,
        service,
        metrics,
        secrets,
        // The warm configurations' runs and sessions are the tenant token's, in the pools' namespace.
        principal: config.warm ? { ...PRINCIPAL, namespace: warmNs } : PRINCIPAL,
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
          // Likewise an ended Sandbox (its pod gone, above) is the session's record until its TTL.
          for (const id of made.sessions) {
            const sandbox = await getSandbox(cluster, ns, id);
            const phase = sandbox?.status?.phase;
            if (sandbox && (!phase || !isSessionEnded(phase)))
              live.push(`Sandbox ${id} (${phase ?? 'no phase'})`);
          }
          return [...pods, ...live];
        },
      });
    },
    async close() {
      if (!host) return;
      const h = await host;
      await h.service.shutdown({ endSessions: true });
      await stopSuite(h.suite, false, (l) => process.stderr.write(`# ${l}\n`));
      await h.suite.cluster.deleteNamespace(h.warmNs);
    },
  };
}
