import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Container, Pod } from '../../../../src/kube/objects.js';
import { buildConfigMap } from '../../../../src/controller/sandboxrun/build-config-map.js';
import {
  buildNetworkPolicy,
  sameNetworkPolicySpec,
} from '../../../../src/controller/pod/build-network-policy.js';
import { controllerOf, isControlledBy } from '../../../../src/controller/children.js';
import { LOOPBACK_NAMESERVER } from '../../../../src/controller/pod/build-sandbox-pod.js';
import { buildRunPod, JOB_KEY } from '../../../../src/controller/sandboxrun/build-run-pod.js';
import { runChildMeta, runPodSelector } from '../../../../src/controller/sandboxrun/run-ref.js';
import { encodeJob } from '../../../../src/runner/protocol.js';
import { effective, RUN, SETTINGS } from '../fixtures.js';

const spec = effective({
  template: 'python',
  code: 'print(1)',
  timeoutSeconds: 20,
  resources: { cpu: '500m', memory: '128Mi' },
});
const pod: Pod = buildRunPod(RUN, spec, SETTINGS);
const podSpec = pod.spec!;
const c: Container = podSpec.containers[0]!;

describe('buildRunPod: Pod Security Standards, restricted profile, field by field', () => {
  test('no host namespaces, no host ports, no hostPath', () => {
    assert.equal(podSpec.hostNetwork, false);
    assert.equal(podSpec.hostPID, false);
    assert.equal(podSpec.hostIPC, false);
    assert.equal(podSpec.shareProcessNamespace, false);
    for (const v of podSpec.volumes ?? []) {
      assert.equal(v.hostPath, undefined, v.name);
      assert.ok(v.emptyDir || v.configMap, `${v.name}: only emptyDir and configMap volumes`);
    }
    assert.equal(c.ports, undefined);
  });

  test('runs as non-root uid/gid 1000 (pod and container)', () => {
    assert.equal(podSpec.securityContext?.runAsNonRoot, true);
    assert.equal(podSpec.securityContext?.runAsUser, 1000);
    assert.equal(podSpec.securityContext?.runAsGroup, 1000);
    assert.equal(podSpec.securityContext?.fsGroup, 1000);
    assert.equal(c.securityContext?.runAsNonRoot, true);
    assert.equal(c.securityContext?.runAsUser, 1000);
    assert.equal(c.securityContext?.runAsGroup, 1000);
  });

  test('no privilege: not privileged, no escalation, every capability dropped', () => {
    assert.equal(c.securityContext?.privileged, false);
    assert.equal(c.securityContext?.allowPrivilegeEscalation, false);
    assert.deepEqual(c.securityContext?.capabilities, { drop: ['ALL'] });
  });

  test("sandpit's own seccomp profile as a localhost profile (pod and container), read-only root filesystem", () => {
    const runc = { type: 'Localhost', localhostProfile: 'sandpit/runc.json' };
    assert.deepEqual(podSpec.securityContext?.seccompProfile, runc);
    assert.deepEqual(c.securityContext?.seccompProfile, runc);
    assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
  });

  test('a gVisor RuntimeClass takes the gVisor profile; RuntimeDefault when the config says so', () => {
    const gvisor = buildRunPod(
      RUN,
      effective({ template: 'python', code: '', runtime: 'gvisor' }, ['gvisor']),
      SETTINGS,
    );
    const want = { type: 'Localhost', localhostProfile: 'sandpit/gvisor.json' };
    assert.deepEqual(gvisor.spec?.securityContext?.seccompProfile, want);
    assert.deepEqual(gvisor.spec?.containers[0]?.securityContext?.seccompProfile, want);
    const runtimeDefault = buildRunPod(RUN, spec, {
      ...SETTINGS,
      seccomp: { profile: 'RuntimeDefault', gvisorRuntimeClasses: ['gvisor'] },
    });
    assert.deepEqual(runtimeDefault.spec?.securityContext?.seccompProfile, { type: 'RuntimeDefault' });
    assert.deepEqual(runtimeDefault.spec?.containers[0]?.securityContext?.seccompProfile, {
      type: 'RuntimeDefault',
    });
  });

  test('nothing else a restricted profile forbids: no sysctls, no SELinux or AppArmor overrides, no procMount', () => {
    assert.equal(podSpec.securityContext?.sysctls, undefined);
    assert.equal(podSpec.securityContext?.seLinuxOptions, undefined);
    assert.equal(c.securityContext?.seLinuxOptions, undefined);
    assert.equal(c.securityContext?.procMount, undefined);
    assert.equal(pod.metadata?.annotations, undefined);
  });

  test('no service account token, no service links', () => {
    assert.equal(podSpec.automountServiceAccountToken, false);
    assert.equal(podSpec.enableServiceLinks, false);
  });

  test('DNS: policy None with a loopback-only nameserver while egress is none', () => {
    assert.equal(podSpec.dnsPolicy, 'None');
    assert.deepEqual(podSpec.dnsConfig?.nameservers, [LOOPBACK_NAMESERVER]);
    assert.equal(LOOPBACK_NAMESERVER, '127.0.0.1');
    assert.deepEqual(podSpec.dnsConfig?.searches, []);
  });

  test('one-shot: restartPolicy Never; activeDeadlineSeconds is the deadline plus the start-up grace', () => {
    assert.equal(podSpec.restartPolicy, 'Never');
    assert.equal(podSpec.activeDeadlineSeconds, 20 + SETTINGS.startGraceSeconds);
  });

  test('resources: limits from the evaluated policy, small requests under them', () => {
    assert.deepEqual(c.resources?.limits, { cpu: '500m', memory: '128Mi' });
    assert.deepEqual(c.resources?.requests, { cpu: '10m', memory: '32Mi' });
    const tiny = buildRunPod(
      RUN,
      effective({ template: 'python', code: '', resources: { cpu: '5m', memory: '16Mi' } }),
      SETTINGS,
    );
    assert.deepEqual(tiny.spec!.containers[0]!.resources?.requests, { cpu: '5m', memory: '16Mi' });
  });

  test('memory-backed, size-limited emptyDirs for the workspace and /tmp (nothing on the node disk); the job mounted read-only from the ConfigMap', () => {
    assert.equal(podSpec.volumes?.find((v) => v.name === 'workspace')?.emptyDir?.medium, 'Memory');
    assert.equal(podSpec.volumes?.find((v) => v.name === 'tmp')?.emptyDir?.medium, 'Memory');
    const vols = Object.fromEntries((podSpec.volumes ?? []).map((v) => [v.name, v]));
    assert.equal(vols.workspace?.emptyDir?.sizeLimit, '64Mi');
    assert.equal(vols.tmp?.emptyDir?.sizeLimit, '64Mi');
    assert.equal(vols.job?.configMap?.name, pod.metadata?.name);
    assert.deepEqual(vols.job?.configMap?.items, [{ key: JOB_KEY, path: JOB_KEY }]);
    const mounts = Object.fromEntries((c.volumeMounts ?? []).map((m) => [m.mountPath, m]));
    assert.equal(mounts['/workspace']?.name, 'workspace');
    assert.equal(mounts['/tmp']?.name, 'tmp');
    assert.equal(mounts['/sandpit/job']?.readOnly, true);
    assert.equal(mounts['/workspace']?.readOnly, undefined);
  });

  test('the runner in plain mode reads the job; exit report in the termination log', () => {
    assert.deepEqual(c.command, [
      '/usr/local/bin/sandpit-runner',
      '--job',
      '/sandpit/job/job.bin',
      '--plain',
    ]);
    assert.equal(c.args, undefined);
    assert.equal(c.env, undefined, 'the environment travels in the job, not in the pod spec');
    assert.equal(c.terminationMessagePolicy, 'File');
    assert.equal(c.terminationMessagePath, '/dev/termination-log');
    assert.equal(c.image, 'sandpit/python:3.11');
    assert.equal(c.imagePullPolicy, 'IfNotPresent');
    assert.equal(c.stdin, false);
    assert.equal(c.tty, false);
  });

  test('runtimeClassName from the decision; absent when there is none', () => {
    assert.equal(podSpec.runtimeClassName, undefined);
    const g = buildRunPod(
      RUN,
      effective({ template: 'python', code: '', runtime: 'gvisor' }, ['gvisor']),
      SETTINGS,
    );
    assert.equal(g.spec?.runtimeClassName, 'gvisor');
  });

  test('deterministic: the same inputs give the same pod', () => {
    assert.deepEqual(buildRunPod(RUN, spec, SETTINGS), pod);
  });
});

describe('children metadata', () => {
  test('name, namespace, system labels and a controller owner reference', () => {
    for (const obj of [
      pod,
      buildConfigMap(RUN, Buffer.from('x')),
      buildNetworkPolicy(runChildMeta(RUN), runPodSelector(RUN)),
    ]) {
      assert.match(obj.metadata?.name ?? '', /^hello-[0-9a-f]{5}$/);
      assert.equal(obj.metadata?.name, pod.metadata?.name);
      assert.equal(obj.metadata?.namespace, 'agents');
      assert.deepEqual(obj.metadata?.labels, {
        'sandpit.dev/managed-by': 'sandpit-operator',
        'sandpit.dev/component': 'sandbox',
        'sandpit.dev/run': 'hello',
        'sandpit.dev/run-uid': RUN.uid,
      });
      assert.deepEqual(obj.metadata?.ownerReferences, [
        {
          apiVersion: 'sandpit.dev/v1alpha1',
          kind: 'SandboxRun',
          name: 'hello',
          uid: RUN.uid,
          controller: true,
        },
      ]);
    }
  });

  test('ownership: controlled by the run with that UID only; controllerOf routes a child to its run', () => {
    const plain = JSON.parse(JSON.stringify(pod)) as Parameters<typeof isControlledBy>[0];
    assert.equal(isControlledBy(plain, RUN), true);
    assert.equal(isControlledBy(plain, { ...RUN, uid: 'other' }), false);
    assert.deepEqual(controllerOf(plain), {
      apiVersion: 'sandpit.dev/v1alpha1',
      kind: 'SandboxRun',
      key: 'agents/hello',
    });
    assert.equal(controllerOf({ metadata: { namespace: 'agents', ownerReferences: [] } }), undefined);
  });
});

describe('buildConfigMap', () => {
  test('immutable, the encoded job as binaryData', () => {
    const job = encodeJob(spec);
    const cm = buildConfigMap(RUN, job);
    assert.equal(cm.immutable, true);
    assert.deepEqual(Object.keys(cm.binaryData ?? {}), [JOB_KEY]);
    assert.deepEqual(Buffer.from(cm.binaryData![JOB_KEY]!, 'base64'), job);
    assert.equal(cm.data, undefined);
  });
});

describe('buildNetworkPolicy', () => {
  const np = buildNetworkPolicy(runChildMeta(RUN), runPodSelector(RUN));
  test('selects exactly the run’s pod (by UID label) and denies all ingress and egress', () => {
    assert.deepEqual(np.spec, {
      podSelector: { matchLabels: { 'sandpit.dev/run-uid': RUN.uid } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    });
    assert.equal(pod.metadata?.labels?.['sandpit.dev/run-uid'], RUN.uid);
  });

  test('sameNetworkPolicySpec: omitted empty lists equal [], any rule does not', () => {
    const stored = { podSelector: np.spec!.podSelector, policyTypes: ['Egress', 'Ingress'] };
    assert.equal(sameNetworkPolicySpec(stored, np.spec!), true);
    assert.equal(sameNetworkPolicySpec({ ...stored, egress: [{}] }, np.spec!), false);
    assert.equal(sameNetworkPolicySpec({ ...stored, podSelector: {} }, np.spec!), false);
  });
});
