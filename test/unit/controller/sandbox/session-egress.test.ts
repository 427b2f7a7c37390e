// A session (Sandbox) with an egress allowlist on Kubernetes: admitted exactly when a run's would
// be, and then its children as a run's: the NetworkPolicy (the proxy's pods on its port plus the
// CIDR entries, nothing else), its own Secret with the proxy URL and its credential, the pod's env
// from that Secret; a session without an allowlist keeps its deny-all and no Secret.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toEntry } from '../../../../src/api/egress.js';
import { egressRules, PROXY_URL_KEY } from '../../../../src/controller/pod/egress.js';
import { evaluateSandbox } from '../../../../src/controller/sandbox/evaluate-sandbox.js';
import { buildSessionChildren } from '../../../../src/controller/sandbox/session-children.js';
import { sessionChildMeta } from '../../../../src/controller/sandbox/sandbox-ref.js';
import { evaluateRun } from '../../../../src/controller/sandboxrun/evaluate-run.js';
import { egressCredential } from '../../../../src/egress/credential.js';
import { createPolicy } from '../../../../src/policy/policy.js';
import { CLUSTER_EGRESS, EGRESS_KEY, SANDBOX, SETTINGS } from '../fixtures.js';

const SBX = SANDBOX;
const KEY = EGRESS_KEY;
const EGRESS = CLUSTER_EGRESS;
const policy = createPolicy({
  egress: { disabled: false, ceiling: ['pypi.org', '10.1.2.0/24:5432'].map(toEntry) },
});
const NETWORK = {
  egress: 'allowlist',
  allow: [{ host: 'pypi.org' }, { cidr: '10.1.2.0/24', ports: [5432] }],
};
const ALLOWLIST = { template: 'python', env: [{ name: 'MODE', value: 'x' }], network: NETWORK };
const NONE = { template: 'python', env: [{ name: 'MODE', value: 'x' }] };
const SETTINGS_OF = { pod: SETTINGS, maxTtlSeconds: 7200, egress: EGRESS };

function admitted(spec: unknown, cluster = { networkPolicyEnforced: true, egress: EGRESS }) {
  const v = evaluateSandbox(spec, policy, cluster);
  if (!v.allowed) throw new Error(v.message);
  return v;
}

describe('evaluateSandbox: an allowlist is admitted exactly when a run’s would be', () => {
  const clusters = [
    { networkPolicyEnforced: true },
    { networkPolicyEnforced: true, egress: { ...EGRESS, networkPolicyEnforced: false } },
    { networkPolicyEnforced: false, egress: EGRESS },
  ];

  test('the same verdict and the same refusal as a run with the same allowlist, on every cluster', () => {
    const run = { template: 'python', code: 'print(1)', network: NETWORK };
    for (const cluster of clusters) {
      const session = evaluateSandbox(ALLOWLIST, policy, cluster);
      const r = evaluateRun(run, policy, cluster);
      assert.equal(session.allowed, r.allowed, JSON.stringify(cluster));
      if (!session.allowed && !r.allowed) {
        assert.deepEqual(session.violations, r.violations);
        assert.equal(session.message, r.message);
      }
    }
  });

  test('refused (PolicyDenied) without the proxy, or unless NetworkPolicy is declared enforced', () => {
    const noProxy = evaluateSandbox(ALLOWLIST, policy, clusters[0]!);
    assert.match(noProxy.allowed ? '' : noProxy.message, /runs no egress proxy/);
    const unenforced = evaluateSandbox(ALLOWLIST, policy, clusters[1]!);
    assert.match(unenforced.allowed ? '' : unenforced.message, /egress\.networkPolicyEnforced/);
    assert.equal(unenforced.allowed ? undefined : unenforced.violations[0]?.field, 'network.egress');
  });

  test('the ceilings hold: a host outside sandbox.egress.allow is refused, naming it', () => {
    const wider = { ...ALLOWLIST, network: { egress: 'allowlist', allow: [{ host: 'evil.example' }] } };
    const v = evaluateSandbox(wider, policy, { networkPolicyEnforced: true, egress: EGRESS });
    assert.equal(v.allowed, false);
    assert.match(v.allowed ? '' : v.message, /evil\.example/);
  });

  test('admitted: no no-network check (the pod has the network its policy cuts down to the proxy)', () => {
    assert.equal(
      admitted(ALLOWLIST, { networkPolicyEnforced: false, egress: EGRESS }).requireNoNetwork,
      false,
    );
    assert.equal(admitted(NONE, { networkPolicyEnforced: false, egress: EGRESS }).requireNoNetwork, true);
  });
});

describe('the children of a session with an allowlist', () => {
  const verdict = admitted(ALLOWLIST);
  const children = buildSessionChildren(SBX, verdict, SETTINGS_OF);
  const name = sessionChildMeta(SBX).name!;

  test('its NetworkPolicy selects exactly its pod: egress only to the proxy pods and the CIDR entry', () => {
    const np = children.networkPolicy;
    assert.equal(np.metadata?.name, name);
    assert.deepEqual(np.spec?.podSelector, { matchLabels: { 'sandpit.dev/session-uid': SBX.uid } });
    assert.deepEqual(np.spec?.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(np.spec?.ingress, []);
    assert.deepEqual(np.spec?.egress, [
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'sandpit-system' } },
            podSelector: { matchLabels: EGRESS.peer.podLabels },
          },
        ],
        ports: [{ protocol: 'TCP', port: 3128 }],
      },
      { to: [{ ipBlock: { cidr: '10.1.2.0/24' } }], ports: [{ protocol: 'TCP', port: 5432 }] },
    ]);
  });

  test('its Secret: the proxy URL with the credential of the Sandbox’s identity; owned by it, immutable', () => {
    const secret = children.secret;
    assert.ok(secret);
    assert.equal(secret.metadata?.name, name);
    assert.equal(secret.immutable, true);
    assert.deepEqual(
      secret.metadata?.ownerReferences?.map((o) => [o.kind, o.uid, o.controller]),
      [['Sandbox', SBX.uid, true]],
    );
    const url = new URL(Buffer.from(secret.data![PROXY_URL_KEY]!, 'base64').toString());
    assert.equal(url.host, '10.0.0.42:3128');
    assert.equal(url.username, `sandbox-${SBX.uid}`);
    assert.equal(url.password, egressCredential(KEY, { kind: 'sandbox', uid: SBX.uid }));
  });

  test('its pod: the session’s variables, then the proxy variables from the Secret; no credential in the spec', () => {
    const pod = children.pod;
    const c = pod.spec!.containers[0]!;
    const env = c.env ?? [];
    const own = verdict.effective.env;
    assert.ok(own.some((e) => e.name === 'MODE'));
    assert.deepEqual(env.slice(0, own.length), own);
    assert.equal(env.length, own.length + 6);
    for (const v of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) {
      const e = env.find((x) => x.name === v);
      assert.equal(e?.value, undefined, v);
      assert.deepEqual(e?.valueFrom?.secretKeyRef, { name, key: PROXY_URL_KEY }, v);
    }
    assert.equal(env.find((e) => e.name === 'NO_PROXY')?.value, 'localhost,127.0.0.1,::1');
    assert.ok(!JSON.stringify(pod).includes(egressCredential(KEY, { kind: 'sandbox', uid: SBX.uid })));
    assert.equal(pod.spec?.dnsPolicy, 'None');
    assert.deepEqual(pod.spec?.dnsConfig?.nameservers, ['127.0.0.1']);
    assert.ok(!c.command?.includes('--no-network'));
    assert.equal(pod.spec?.automountServiceAccountToken, false);
  });
});

describe('the children of a session without an allowlist', () => {
  test('deny-all, no Secret, only its own variables; with no proxy configured, the same', () => {
    for (const egress of [EGRESS, undefined]) {
      const verdict = admitted(NONE);
      const children = buildSessionChildren(SBX, verdict, { ...SETTINGS_OF, egress });
      assert.deepEqual(children.networkPolicy.spec?.egress, []);
      assert.equal(children.secret, undefined);
      assert.deepEqual(children.pod.spec?.containers[0]?.env, verdict.effective.env);
    }
    assert.deepEqual(egressRules(admitted(NONE).effective.network, EGRESS), []);
  });
});
