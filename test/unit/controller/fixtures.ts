// Shared inputs for the controller's unit tests.
import { RunRequestSchema, type RunRequestInput } from '../../../src/api/run.js';
import type { ObjectRef } from '../../../src/controller/children.js';
import type { PodSettings } from '../../../src/controller/pod/build-sandbox-pod.js';
import { evaluate, type EffectiveSpec } from '../../../src/policy/evaluate.js';
import { createPolicy } from '../../../src/policy/policy.js';

export const RUN: ObjectRef = {
  apiVersion: 'sandpit.dev/v1alpha1',
  kind: 'SandboxRun',
  name: 'hello',
  namespace: 'agents',
  uid: '0b5a4c3e-1111-2222-3333-444455556666',
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
