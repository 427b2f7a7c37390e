// Shared inputs for the controller's unit tests.
import { RunRequestSchema, type RunRequestInput } from '../../../src/api/run.js';
import {
  LABEL_POOL,
  LABEL_POOL_POD,
  LABEL_POOL_SHAPE,
  LABEL_POOL_UID,
} from '../../../src/api/v1alpha1/labels.js';
import type { Pod } from '../../../src/kube/objects.js';
import type { ObjectRef } from '../../../src/controller/children.js';
import type { PodSettings } from '../../../src/controller/pod/build-sandbox-pod.js';
import type { ClusterEgress } from '../../../src/controller/pod/egress.js';
import { evaluate, type EffectiveSpec } from '../../../src/policy/evaluate.js';
import { createPolicy } from '../../../src/policy/policy.js';

export const RUN: ObjectRef = {
  apiVersion: 'sandpit.dev/v1alpha1',
  kind: 'SandboxRun',
  name: 'hello',
  namespace: 'agents',
  uid: '0b5a4c3e-1111-2222-3333-444455556666',
};

export const SANDBOX: ObjectRef = {
  apiVersion: 'sandpit.dev/v1alpha1',
  kind: 'Sandbox',
  name: 'notebook',
  namespace: 'agents',
  uid: '7c1d2e3f-aaaa-bbbb-cccc-ddddeeeeffff',
};

/** The key of the sandboxes' proxy credentials, and a cluster with the egress proxy that enforces NetworkPolicy. */
export const EGRESS_KEY = Buffer.from('0123456789abcdef0123456789abcdef');
export const CLUSTER_EGRESS: ClusterEgress = {
  service: { ip: '10.0.0.42', port: 3128 },
  peer: {
    namespaceLabels: { 'kubernetes.io/metadata.name': 'sandpit-system' },
    podLabels: { 'app.kubernetes.io/name': 'sandpit', 'app.kubernetes.io/component': 'egress-proxy' },
    port: 3128,
  },
  key: EGRESS_KEY,
  networkPolicyEnforced: true,
};

export const SETTINGS: PodSettings = {
  imagePullPolicy: 'IfNotPresent',
  cpuRequestMilli: 10,
  memoryRequestBytes: 32 * 1024 ** 2,
  startGraceSeconds: 15,
  seccomp: { profile: 'Localhost', gvisorRuntimeClasses: ['gvisor'] },
};

export function effective(
  input: RunRequestInput = { template: 'python', code: 'print(1)' },
  runtimes?: string[],
): EffectiveSpec {
  const policy = createPolicy(runtimes ? { allowedRuntimes: runtimes } : {});
  const r = evaluate(RunRequestSchema.parse(input), policy);
  if (!r.ok) throw new Error(JSON.stringify(r.violations));
  return r.spec;
}

/** An idle pod of SandboxPool `py` (ready, running) with the shape label `shape`. */
export function poolPod(
  name: string,
  shape: string,
  over: {
    labels?: Record<string, string>;
    created?: string;
    ready?: boolean;
    deleting?: boolean;
    owner?: 'pool' | 'none';
    command?: string[];
  } = {},
): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: RUN.namespace,
      uid: `uid-${name}`,
      resourceVersion: '7',
      creationTimestamp: over.created ?? '2026-01-01T00:00:00Z',
      labels: {
        [LABEL_POOL]: 'py',
        [LABEL_POOL_UID]: 'pool-uid',
        [LABEL_POOL_POD]: 'idle',
        [LABEL_POOL_SHAPE]: shape,
        ...over.labels,
      },
      ownerReferences:
        over.owner === 'none'
          ? []
          : [
              {
                apiVersion: 'sandpit.dev/v1alpha1',
                kind: 'SandboxPool',
                name: 'py',
                uid: 'pool-uid',
                controller: true,
              },
            ],
      ...(over.deleting ? { deletionTimestamp: '2026-01-01T00:01:00Z' } : {}),
    },
    spec: {
      containers: [{ name: 'sandbox', image: 'sandpit/python:3.11', command: over.command }],
      activeDeadlineSeconds: 3615,
    },
    status: {
      phase: 'Running',
      startTime: '2026-01-01T00:00:00Z',
      conditions: [{ type: 'Ready', status: over.ready === false ? 'False' : 'True' }],
      containerStatuses: [
        {
          name: 'sandbox',
          image: 'sandpit/python:3.11',
          imageID: '',
          ready: over.ready !== false,
          restartCount: 0,
          state: { running: { startedAt: '2026-01-01T00:00:01Z' } },
        },
      ],
    },
  };
}
