// Egress on Kubernetes, as the operator renders it: the NetworkPolicy (the proxy's pods on its port
// plus the allowlist's CIDR entries, nothing else), the Secret and the pod's env, the warm job, the
// refusals, and the credential the proxy checks.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RunRequestSchema } from '../../../../src/api/run.js';
import { toEntry } from '../../../../src/api/egress.js';
import {
  buildEgressSecret,
  egressEnv,
  egressPodEnv,
  egressRefusal,
  egressRules,
  PROXY_URL_KEY,
} from '../../../../src/controller/pod/egress.js';
import { sameNetworkPolicySpec } from '../../../../src/controller/pod/build-network-policy.js';
import { buildRunPod } from '../../../../src/controller/sandboxrun/build-run-pod.js';
import type { NetworkPolicySpec } from '../../../../src/kube/objects.js';
import { evaluateRun } from '../../../../src/controller/sandboxrun/evaluate-run.js';
import { runChildMeta } from '../../../../src/controller/sandboxrun/run-ref.js';
import { runNetworkPolicy } from '../../../../src/controller/sandboxrun/run-children.js';
import { warmJob } from '../../../../src/controller/sandboxrun/warm-run.js';
import { egressCredential, verifyProxyAuthorization } from '../../../../src/egress/credential.js';
import { evaluate, type EffectiveSpec } from '../../../../src/policy/evaluate.js';
import { createPolicy } from '../../../../src/policy/policy.js';
import { encodeJob } from '../../../../src/runner/protocol.js';
import { CLUSTER_EGRESS, EGRESS_KEY, RUN, SETTINGS } from '../fixtures.js';
import { buildPoolPod } from '../../../../src/controller/sandboxpool/build-pool-pod.js';
import { evaluatePool, poolShapeLabel } from '../../../../src/controller/sandboxpool/evaluate-pool.js';

const KEY = EGRESS_KEY;
const EGRESS = CLUSTER_EGRESS;
const CEILING = ['pypi.org', '*.pythonhosted.org', '10.1.2.0/24:5432', '192.0.2.0/28'].map(toEntry);
const policy = createPolicy({ egress: { disabled: false, ceiling: CEILING } });
const ALLOWLIST = {
  template: 'python',
  code: 'print(1)',
  // The SandboxRun's spec holds the canonical object form (the request also takes `host[:port]` text).
  network: {
    egress: 'allowlist',
    allow: [{ host: 'pypi.org' }, { cidr: '10.1.2.0/24', ports: [5432] }, { cidr: '192.0.2.0/28' }],
  },
};

function effectiveOf(input: unknown): EffectiveSpec {
  const r = evaluate(RunRequestSchema.parse(input), policy);
  if (!r.ok) throw new Error(JSON.stringify(r.violations));
  return r.spec;
}
const spec = effectiveOf(ALLOWLIST);
const none = effectiveOf({ template: 'python', code: 'print(1)' });

describe('the NetworkPolicy of a run with an allowlist', () => {
  const np = runNetworkPolicy({ egress: EGRESS }, RUN, spec);

  test('selects exactly the run pod, no ingress, both policy types', () => {
    assert.deepEqual(np.spec?.podSelector, { matchLabels: { 'sandpit.dev/run-uid': RUN.uid } });
    assert.deepEqual(np.spec?.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(np.spec?.ingress, []);
    assert.equal(np.metadata?.name, runChildMeta(RUN).name);
  });

  test('egress only to the proxy pods on the proxy port, plus each CIDR entry as an ipBlock', () => {
    assert.deepEqual(np.spec?.egress, [
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'sandpit-system' } },
            podSelector: {
              matchLabels: {
                'app.kubernetes.io/name': 'sandpit',
                'app.kubernetes.io/component': 'egress-proxy',
              },
            },
          },
        ],
        ports: [{ protocol: 'TCP', port: 3128 }],
      },
      { to: [{ ipBlock: { cidr: '10.1.2.0/24' } }], ports: [{ protocol: 'TCP', port: 5432 }] },
      { to: [{ ipBlock: { cidr: '192.0.2.0/28' } }] },
    ]);
  });

  test('no host entry becomes a rule (names are the proxy’s to check), and no rule is open-ended', () => {
    for (const rule of np.spec?.egress ?? []) {
      assert.ok(rule.to && rule.to.length > 0, 'every rule names its peers');
      for (const peer of rule.to) assert.ok(peer.ipBlock || peer.podSelector);
    }
  });

  test('as the API server stores it (its own field order) it is the same policy; a changed rule is not', () => {
    const stored = JSON.parse(
      JSON.stringify({
        podSelector: np.spec?.podSelector,
        policyTypes: ['Egress', 'Ingress'],
        egress: np.spec?.egress?.map((r) => ({
          ports: r.ports?.map((p) => ({ port: p.port, protocol: p.protocol })),
          to: r.to?.map((peer) => ({
            ipBlock: peer.ipBlock,
            podSelector: peer.podSelector,
            namespaceSelector: peer.namespaceSelector,
          })),
        })),
      }),
    ) as NetworkPolicySpec;
    assert.equal(sameNetworkPolicySpec(stored, np.spec!), true);
    const widened = structuredClone(stored);
    widened.egress![1]!.to![0]!.ipBlock!.cidr = '0.0.0.0/0';
    assert.equal(sameNetworkPolicySpec(widened, np.spec!), false);
  });

  test('egress none, or no proxy: deny-all', () => {
    assert.deepEqual(runNetworkPolicy({ egress: EGRESS }, RUN, none).spec?.egress, []);
    assert.deepEqual(runNetworkPolicy({}, RUN, spec).spec?.egress, []);
    assert.deepEqual(egressRules(none.network, EGRESS), []);
    assert.deepEqual(egressRules(spec.network, undefined), []);
  });
});

describe("the run's Secret and its pod's env", () => {
  test('the Secret holds the proxy URL with the credential; owned by the run, immutable', () => {
    const secret = buildEgressSecret(runChildMeta(RUN), EGRESS, { kind: 'run', uid: RUN.uid });
    assert.equal(secret.immutable, true);
    assert.equal(secret.metadata?.ownerReferences?.[0]?.uid, RUN.uid);
    assert.equal(secret.metadata?.ownerReferences?.[0]?.controller, true);
    const url = new URL(Buffer.from(secret.data![PROXY_URL_KEY]!, 'base64').toString());
    assert.equal(url.host, '10.0.0.42:3128');
    assert.equal(url.username, `run-${RUN.uid}`);
    assert.equal(url.password, egressCredential(KEY, { kind: 'run', uid: RUN.uid }));
  });

  test('the pod takes the proxy variables from that Secret (no credential in the pod spec)', () => {
    const pod = buildRunPod(RUN, spec, SETTINGS);
    const env = pod.spec!.containers[0]!.env ?? [];
    assert.deepEqual(env, egressPodEnv(spec.network, runChildMeta(RUN).name!));
    for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) {
      const v = env.find((e) => e.name === name);
      assert.equal(v?.value, undefined, name);
      assert.deepEqual(v?.valueFrom?.secretKeyRef, { name: runChildMeta(RUN).name, key: PROXY_URL_KEY });
    }
    assert.equal(env.find((e) => e.name === 'NO_PROXY')?.value, 'localhost,127.0.0.1,::1');
    assert.ok(!JSON.stringify(pod).includes(egressCredential(KEY, { kind: 'run', uid: RUN.uid })));
    assert.equal(pod.spec?.dnsPolicy, 'None');
  });

  test('a run without egress gets no proxy variables', () => {
    assert.equal(buildRunPod(RUN, none, SETTINGS).spec!.containers[0]!.env, undefined);
  });
});

describe('admission and the job', () => {
  test('an allowlist is refused (PolicyDenied) without the proxy, or unless NetworkPolicy is declared enforced', () => {
    const noProxy = evaluateRun(ALLOWLIST, policy, { networkPolicyEnforced: true });
    assert.equal(noProxy.allowed, false);
    assert.match(noProxy.allowed ? '' : noProxy.message, /runs no egress proxy/);
    const unenforced = evaluateRun(ALLOWLIST, policy, {
      networkPolicyEnforced: true,
      egress: { ...EGRESS, networkPolicyEnforced: false },
    });
    assert.equal(unenforced.allowed, false);
    assert.match(unenforced.allowed ? '' : unenforced.message, /egress\.networkPolicyEnforced/);
    assert.equal(egressRefusal(EGRESS), undefined);
  });

  test('admitted: the job has the runner pass on the proxy variables, and no no-network check', () => {
    const r = evaluateRun(ALLOWLIST, policy, { networkPolicyEnforced: false, egress: EGRESS });
    assert.ok(r.allowed);
    assert.deepEqual(
      r.job,
      encodeJob(spec, {
        requireNoNetwork: false,
        inheritEnv: ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy'],
      }),
    );
  });

  test('warm: the pool pod carries nothing of the run; the job brings the proxy URL and its credential', () => {
    const key = Buffer.alloc(16, 7);
    const job = warmJob({ networkPolicyEnforced: false, egress: EGRESS }, RUN, { effective: spec, key });
    const env = egressEnv(EGRESS, { kind: 'run', uid: RUN.uid });
    assert.deepEqual(
      job,
      encodeJob({ ...spec, env: [...spec.env, ...env] }, { key, requireNoNetwork: false }),
    );
    assert.ok(job.includes(Buffer.from(egressCredential(KEY, { kind: 'run', uid: RUN.uid }))));
    const plain = warmJob({ networkPolicyEnforced: false, egress: EGRESS }, RUN, { effective: none, key });
    assert.deepEqual(plain, encodeJob(none, { key, requireNoNetwork: true }));
  });
});

describe('the credential', () => {
  const id = { kind: 'run', uid: RUN.uid } as const;
  const header = (user: string, password: string): string =>
    `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

  test('the right one names its run; different per run and per key', () => {
    assert.deepEqual(verifyProxyAuthorization(KEY, header(`run-${RUN.uid}`, egressCredential(KEY, id))), id);
    const other = { kind: 'run', uid: '0b5a4c3e-1111-2222-3333-000000000000' } as const;
    assert.notEqual(egressCredential(KEY, id), egressCredential(KEY, other));
    assert.notEqual(egressCredential(KEY, id), egressCredential(Buffer.alloc(32, 1), id));
  });

  test("a wrong, another run's, or missing credential names nothing", () => {
    const other = { kind: 'run', uid: '0b5a4c3e-1111-2222-3333-000000000000' } as const;
    assert.equal(verifyProxyAuthorization(KEY, header(`run-${RUN.uid}`, 'x')), undefined);
    assert.equal(
      verifyProxyAuthorization(KEY, header(`run-${RUN.uid}`, egressCredential(KEY, other))),
      undefined,
    );
    assert.equal(
      verifyProxyAuthorization(KEY, header(`pod-${RUN.uid}`, egressCredential(KEY, id))),
      undefined,
    );
    assert.equal(verifyProxyAuthorization(KEY, undefined), undefined);
    assert.equal(verifyProxyAuthorization(KEY, 'Bearer abc'), undefined);
  });
});

describe('warm: a SandboxPool of egress allowlist', () => {
  const POOL = {
    ...RUN,
    kind: 'SandboxPool',
    name: 'py-egress',
    uid: '0b5a4c3e-1111-2222-3333-777777777777',
  };

  test("its shape is an allowlisted run's (whatever that run's allowlist), not a plain run's", () => {
    const pool = evaluatePool({ template: 'python', egress: 'allowlist' }, policy);
    assert.ok(pool.allowed);
    assert.equal(pool.shapeLabel, poolShapeLabel(spec, 'run'));
    const narrower = effectiveOf({ ...ALLOWLIST, network: { egress: 'allowlist', allow: ['pypi.org'] } });
    assert.equal(pool.shapeLabel, poolShapeLabel(narrower, 'run'));
    assert.notEqual(pool.shapeLabel, poolShapeLabel(none, 'run'));
    const plain = evaluatePool({ template: 'python' }, policy);
    assert.ok(plain.allowed);
    assert.equal(plain.shapeLabel, poolShapeLabel(none, 'run'));
  });

  test("its pods carry the proxy's address and no credential; sessions are refused", () => {
    const pool = evaluatePool({ template: 'python', egress: 'allowlist' }, policy);
    assert.ok(pool.allowed);
    const pod = buildPoolPod(
      POOL,
      { mode: 'run', maxIdleSeconds: 600, effective: pool.effective, shapeLabel: pool.shapeLabel },
      { settings: SETTINGS, ceilings: policy, requireNoNetwork: false, egress: EGRESS },
    );
    assert.deepEqual(pod.spec?.containers[0]?.env, [
      { name: 'SANDPIT_EGRESS_PROXY', value: '10.0.0.42:3128' },
    ]);
    const session = evaluatePool({ template: 'python', egress: 'allowlist', mode: 'session' }, policy);
    assert.equal(session.allowed, false);
    assert.match(session.allowed ? '' : session.message, /egress: sessions with an egress allowlist/);
  });
});
