// The contract cases against the Kubernetes backend: real SandboxRuns on the real cluster, reconciled
// by a real `sandpit operator` process (static operator identity, deploy/rbac.yaml), created by the
// backend as the static gateway identity bound to deploy/gateway-rbac.yaml (never admin). Then what
// only this backend has: the SandboxRun record, health, and its typed errors.
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { RunRequestSchema } from '../../src/api/run.js';
import { principalLabelValue } from '../../src/backends/kubernetes/build-sandbox-run.js';
import type { KubernetesBackend } from '../../src/backends/kubernetes/kubernetes-backend.js';
import type { SandpitService } from '../../src/gateway/service.js';
import { evaluate, type EffectiveSpec } from '../../src/policy/evaluate.js';
import { isAppError } from '../../src/shared/errors.js';
import { auditOf } from '../support/audit.js';
import { withCluster, type KubeCluster } from '../support/kube/index.js';
import {
  failureMarkingTest,
  getRun,
  startSuite,
  stopSuite,
  type Suite,
} from '../integration/kubernetes/operator-harness.js';
import { contractCases } from './cases.js';
import { idempotencyCases } from './idempotency-cases.js';
import { getSandbox } from '../integration/kubernetes/sandbox-harness.js';
import { sessionContractCases } from './session-cases.js';
import { bindGatewayRbac, gatewayBackend } from './kube-gateway.js';
import {
  CONTRACT_SANDBOX_CONFIG,
  contractPolicy,
  CountingBackend,
  createService,
  observeRun,
  PRINCIPAL,
  type ContractTarget,
} from './target.js';

/** The RuntimeClass test/env/kube-cluster.sh installs (deploy/runtimeclasses.yaml, handler runsc). */
const GVISOR = 'gvisor';

let suite: Suite;
let inner: KubernetesBackend;
let target: ContractTarget;
let failed = false;
/** The services of other replicas the cases made: shut down after. */
const replicas: SandpitService[] = [];

async function podsOf(cluster: KubeCluster, ns: string, runId: string): Promise<V1Pod[]> {
  return (await cluster.core.listNamespacedPod({ namespace: ns, labelSelector: `sandpit.dev/run=${runId}` }))
    .items;
}

function spec(request: Parameters<typeof RunRequestSchema.parse>[0]): EffectiveSpec {
  const e = evaluate(RunRequestSchema.parse(request), contractPolicy([]));
  assert.ok(e.ok);
  return e.spec;
}

describe('contract: kubernetes backend', { timeout: 1_800_000 }, () => {
  before(async () => {
    suite = await startSuite(await withCluster(), 'contract', {
      sandbox: CONTRACT_SANDBOX_CONFIG,
      kubernetes: { allowedRuntimeClasses: [GVISOR] },
    });
    const { cluster, ns } = suite;
    await bindGatewayRbac(cluster, ns);
    inner = gatewayBackend(cluster, ns, { logger: undefined });
    const backend = new CountingBackend(inner);
    const sandboxesOf = async (runId: string): Promise<string[]> =>
      (await podsOf(cluster, ns, runId)).map((p) => p.metadata?.name ?? '');
    target = {
      name: 'kubernetes',
      backend,
      // The operator's policy: RuntimeClasses in place of Docker runtimes (none allowed here, but
      // gvisor through the service of the gVisor cases).
      service: createService(backend, contractPolicy([])),
      sandboxesOf,
      async waitSandboxesGone(runId, timeoutMs) {
        const deadline = Date.now() + timeoutMs;
        while ((await sandboxesOf(runId)).length > 0) {
          if (Date.now() > deadline) throw new Error(`pods of ${runId} still exist after ${timeoutMs} ms`);
          await new Promise((r) => setTimeout(r, 200));
        }
      },
      async sandboxCount() {
        const runs = (await cluster.kubectl(['get', 'sandboxruns', '-n', ns, '-o', 'name'])).stdout;
        const pods = await cluster.core.listNamespacedPod({ namespace: ns });
        return runs.split('\n').filter(Boolean).length + pods.items.length;
      },
      recordPhase: async (runId) => (await getRun(cluster, ns, runId))?.status?.phase,
      async waitSessionGone(sessionId, timeoutMs, kept) {
        const deadline = Date.now() + timeoutMs;
        // What is left: its pods, and its Sandbox unless it is the record `kept` says.
        const left = async (): Promise<string[]> => {
          const pods = await cluster.core.listNamespacedPod({
            namespace: ns,
            labelSelector: `sandpit.dev/session=${sessionId}`,
          });
          const status = (await getSandbox(cluster, ns, sessionId))?.status;
          const record = status && { phase: status.phase, reason: status.reason };
          return [
            ...pods.items.map((p) => `pod ${p.metadata?.name}`),
            ...(record && !isDeepStrictEqual(record, kept) ? [`its Sandbox ${JSON.stringify(record)}`] : []),
            ...(kept && !record ? ['no Sandbox kept as its record'] : []),
          ];
        };
        let now = await left();
        while (now.length > 0) {
          if (Date.now() > deadline)
            throw new Error(`session ${sessionId}: ${now.join(', ')} after ${timeoutMs} ms`);
          await new Promise((r) => setTimeout(r, 250));
          now = await left();
        }
      },
      idlePrecisionMs: 20_000,
      separateStderr: false,
      liveOutputUnderGvisor: false,
      gvisor: { runtime: GVISOR, service: createService(backend, contractPolicy([GVISOR])) },
      overheadMs: 8000,
      keys: 'record',
      async runRecordCount() {
        const runs = (await cluster.kubectl(['get', 'sandboxruns', '-n', ns, '-o', 'name'])).stdout;
        return runs.split('\n').filter(Boolean).length;
      },
      replica() {
        const service = createService(
          new CountingBackend(gatewayBackend(cluster, ns, { logger: undefined })),
          contractPolicy([]),
        );
        replicas.push(service);
        return service;
      },
    };
  });
  after(async () => {
    await Promise.all(replicas.map((r) => r.shutdown()));
    await target?.service.shutdown();
    await target?.gvisor.service.shutdown();
    await stopSuite(suite, failed, (l) => process.stderr.write(`# ${l}\n`));
  });

  describe('the shared cases', () => {
    contractCases(
      () => target,
      () => (failed = true),
    );
    sessionContractCases(
      () => target,
      () => (failed = true),
    );
    idempotencyCases(
      () => target,
      () => (failed = true),
    );
  });

  describe('kubernetes only', () => {
    const it = failureMarkingTest(180_000, () => (failed = true));

    it('the SandboxRun record: labels, the principal, the TTL, and the operator’s status', async () => {
      const { cluster, ns } = suite;
      const o = await observeRun(target, { template: 'python', code: 'print("kept")' });
      const run = await getRun(cluster, ns, o.result.runId);
      assert.ok(run, 'the record exists after the run');
      assert.equal(run.metadata?.labels?.['sandpit.dev/run'], o.result.runId);
      assert.equal(run.metadata?.labels?.['sandpit.dev/managed-by'], 'sandpit-gateway');
      assert.equal(run.metadata?.labels?.['sandpit.dev/principal'], principalLabelValue(PRINCIPAL.name));
      assert.equal(run.metadata?.annotations?.['sandpit.dev/principal'], PRINCIPAL.name);
      assert.equal(run.spec.ttlSecondsAfterFinished, 600);
      assert.equal(run.spec.template, 'python');
      assert.equal(run.status?.phase, 'Succeeded');
      assert.equal(run.status?.output?.tail, 'kept\n');
      // The operator writes the audit line just after the status the backend saw.
      const line = await suite.operator.waitForLog(
        (l) => auditOf(l)?.event === 'run' && auditOf(l)?.runId === `${ns}/${o.result.runId}`,
        10_000,
        'the audit line of the run',
      );
      assert.equal(auditOf(line)?.principal, PRINCIPAL.name, 'the operator audits the gateway’s principal');
    });

    it('health: the apiserver, the CRD, the operator’s Lease and every permission', async () => {
      const h = await inner.health();
      assert.equal(h.ok, true, h.detail);
      assert.equal(h.backend, 'kubernetes');
      assert.match(h.detail, /SandboxRun API installed/);
      assert.match(h.detail, new RegExp(`operator ${suite.operator.identity} leads`));
    });

    it('close() cancels the runs it started and waits for them', async () => {
      const { cluster, ns } = suite;
      const closing = gatewayBackend(cluster, ns);
      const execution = closing.start(
        spec({ template: 'python', code: "import time\nprint('up', flush=True)\ntime.sleep(60)" }),
        { runId: `run-close${Date.now().toString(16).slice(-7)}`, principal: 'closer' },
      );
      for await (const chunk of execution.output) if (chunk.data.toString().includes('up')) break;
      await closing.close();
      const result = await execution.result;
      assert.equal(result.phase, 'Cancelled', JSON.stringify(result));
      // A closed backend watches nothing any more (cleanedUp resolves): the operator deletes the pod.
      await execution.cleanedUp;
      await target.waitSandboxesGone(execution.runId, 60_000);
    });

    it('without the RoleBinding: FORBIDDEN, naming deploy/gateway-rbac.yaml; health names the missing verbs', async () => {
      const { cluster } = suite;
      const bare = await cluster.createNamespace('contract-no-rbac');
      try {
        const backend = gatewayBackend(cluster, bare);
        await assert.rejects(
          backend.start(spec({ template: 'python', code: 'print(1)' }), { runId: 'run-forbidden01' }).result,
          (e: unknown) => {
            assert.ok(isAppError(e));
            assert.equal(e.code, 'FORBIDDEN', e.message);
            assert.match(e.message, new RegExp(`may not create sandboxruns in namespace ${bare}`));
            assert.match(e.hint ?? '', /deploy\/gateway-rbac\.yaml/);
            return true;
          },
        );
        const h = await backend.health();
        assert.equal(h.ok, false);
        assert.match(h.detail, /the gateway lacks create sandboxruns\.sandpit\.dev in/);
        assert.match(h.detail, /get pods\/log in/);
        await backend.close();
      } finally {
        await cluster.deleteNamespace(bare);
      }
    });

    it('no operator watching the namespace: ENGINE_UNAVAILABLE after the pickup timeout, and the run cancelled', async () => {
      const { cluster } = suite;
      const lonely = await cluster.createNamespace('contract-no-operator');
      try {
        await bindGatewayRbac(cluster, lonely);
        const backend = gatewayBackend(cluster, lonely, { pickupTimeoutSeconds: 3 });
        const t0 = performance.now();
        await assert.rejects(
          backend.start(spec({ template: 'python', code: 'print(1)' }), { runId: 'run-lonely0001' }).result,
          (e: unknown) => {
            assert.ok(isAppError(e));
            assert.equal(e.code, 'ENGINE_UNAVAILABLE', e.message);
            assert.match(e.message, /no operator acted on SandboxRun .*within 3 s/);
            assert.match(e.hint ?? '', /sandpit operator/);
            return true;
          },
        );
        assert.ok(performance.now() - t0 < 8000);
        const left = await getRun(cluster, lonely, 'run-lonely0001');
        assert.equal(left?.spec.cancel, true, 'a late operator will not run it');
        const h = await backend.health();
        assert.equal(h.ok, false);
        assert.match(h.detail, /nobody holds the operator Lease/);
        await backend.close();
      } finally {
        await cluster.deleteNamespace(lonely);
      }
    });

    it('the apiserver unreachable: ENGINE_UNAVAILABLE with a hint; health says so', async () => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        // loopback port 1: nothing listens there
        clusters: [{ name: 'nowhere', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
        users: [{ name: 'nobody', token: 'x' }],
        contexts: [{ name: 'nowhere', cluster: 'nowhere', user: 'nobody' }],
        currentContext: 'nowhere',
      });
      const backend = gatewayBackend(suite.cluster, 'default', { kubeConfig: kc });
      await assert.rejects(
        backend.start(spec({ template: 'python', code: 'print(1)' }), { runId: 'run-unreach001' }).result,
        (e: unknown) => {
          assert.ok(isAppError(e));
          assert.equal(e.code, 'ENGINE_UNAVAILABLE', e.message);
          assert.match(e.message, /127\.0\.0\.1:1 is not answering/);
          assert.match(e.hint ?? '', /kubeconfig/);
          return true;
        },
      );
      const h = await backend.health();
      assert.equal(h.ok, false);
      assert.match(h.detail, /not answering/);
      await backend.close();
    });
  });
});
