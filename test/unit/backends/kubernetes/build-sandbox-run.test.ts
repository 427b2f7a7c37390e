import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RunRequestSchema, type RunRequestInput } from '../../../../src/api/run.js';
import { SandboxRunSpecSchema } from '../../../../src/api/v1alpha1/sandboxrun.js';
import {
  buildSandboxRun,
  LABEL_PRINCIPAL,
  LABEL_TASK_OF,
  principalLabelValue,
  type BuildOptions,
} from '../../../../src/backends/kubernetes/build-sandbox-run.js';
import { evaluateRun, withRunFilesCap } from '../../../../src/controller/sandboxrun/evaluate-run.js';
import { evaluate, type EffectiveSpec } from '../../../../src/policy/evaluate.js';
import { createPolicy } from '../../../../src/policy/policy.js';

const policy = createPolicy({
  imageAllowlist: ['sandpit/*'],
  defaultRuntime: 'gvisor',
  allowedRuntimes: ['gvisor', 'kata'],
});
const OPTIONS: BuildOptions = {
  runId: 'run-0123456789ab',
  namespace: 'agents',
  principal: 'alice@example.com',
  ttlSecondsAfterFinished: 600,
  pendingTimeoutSeconds: 120,
};

function effective(request: RunRequestInput): EffectiveSpec {
  const e = evaluate(RunRequestSchema.parse(request), policy);
  assert.ok(e.ok, JSON.stringify(!e.ok && e.violations));
  return e.spec;
}

const FULL: RunRequestInput = {
  template: 'python',
  code: "import sys\nprint('héllo', sys.stdin.read())",
  files: [
    { path: 'data/in.csv', content: 'a,b\n1,2\n' },
    {
      path: 'bin/tool',
      content: Buffer.from([0, 1, 2, 255]).toString('base64'),
      encoding: 'base64',
      executable: true,
    },
  ],
  stdin: 'from stdin\n',
  env: [{ name: 'GREETING', value: 'hi' }],
  resources: { cpu: '500m', memory: '256m', pids: 64, ephemeralStorage: '32Mi' },
  timeoutSeconds: 20,
  runtime: 'kata',
  outputs: ['*.png', '/etc/passwd', 'out/*.csv'],
};

describe('buildSandboxRun', () => {
  test('metadata: the run id as name, system labels, the principal hashed as a label and kept as an annotation', () => {
    const run = buildSandboxRun(effective(FULL), {
      ...OPTIONS,
      labels: { team: 'ml', 'sandpit.dev/run': 'forged', [LABEL_PRINCIPAL]: 'forged' },
    });
    assert.equal(run.apiVersion, 'sandpit.dev/v1alpha1');
    assert.equal(run.kind, 'SandboxRun');
    assert.deepEqual(run.metadata, {
      name: 'run-0123456789ab',
      namespace: 'agents',
      labels: {
        team: 'ml',
        'sandpit.dev/managed-by': 'sandpit-gateway',
        'sandpit.dev/run': 'run-0123456789ab',
        'sandpit.dev/principal': principalLabelValue('alice@example.com'),
      },
      annotations: { 'sandpit.dev/principal': 'alice@example.com' },
    });
    assert.match(principalLabelValue('alice@example.com'), /^p-[0-9a-f]{20}$/);
    assert.notEqual(principalLabelValue('alice'), principalLabelValue('bob'));
  });

  test("a task's run carries its owner's hash as the task label (tasks/list selects by it); other runs do not", () => {
    const owner = 'token:0123456789abcdef';
    const task = buildSandboxRun(effective(FULL), { ...OPTIONS, owner, task: true });
    assert.equal(task.metadata.labels?.[LABEL_TASK_OF], principalLabelValue(owner));
    const plain = buildSandboxRun(effective(FULL), { ...OPTIONS, owner });
    assert.equal(plain.metadata.labels?.[LABEL_TASK_OF], undefined);
    const forged = buildSandboxRun(effective(FULL), {
      ...OPTIONS,
      owner,
      labels: { [LABEL_TASK_OF]: 'p-x' },
    });
    assert.equal(forged.metadata.labels?.[LABEL_TASK_OF], undefined, 'only `task` marks a task');
  });

  test("the owner's principal id, when given, is an annotation beside the name", () => {
    const run = buildSandboxRun(effective(FULL), { ...OPTIONS, owner: 'token:0123456789abcdef' });
    assert.deepEqual(run.metadata.annotations, {
      'sandpit.dev/principal': 'alice@example.com',
      'sandpit.dev/owner': 'token:0123456789abcdef',
    });
  });

  test("a run under an idempotency key: its name as given, and the request's digest an annotation", () => {
    const digest = 'a'.repeat(64);
    const run = buildSandboxRun(effective(FULL), {
      ...OPTIONS,
      runId: 'r-0123456789abcdef',
      owner: 'token:0123456789abcdef',
      requestDigest: digest,
    });
    assert.equal(run.metadata.name, 'r-0123456789abcdef');
    assert.equal(run.metadata.annotations?.['sandpit.dev/request-digest'], digest);
  });

  test('spec: code, files as base64, stdin, env, argv, limits, timeout, RuntimeClass, TTL and pending timeout', () => {
    const spec = effective(FULL);
    const run = buildSandboxRun(spec, OPTIONS);
    assert.deepEqual(run.spec, {
      template: 'python',
      image: 'sandpit/python:3.11',
      code: "import sys\nprint('héllo', sys.stdin.read())",
      command: spec.argv,
      files: [
        { path: 'data/in.csv', content: Buffer.from('a,b\n1,2\n').toString('base64'), encoding: 'base64' },
        { path: 'bin/tool', content: 'AAEC/w==', encoding: 'base64', executable: true },
      ],
      stdin: 'from stdin\n',
      env: [...spec.env],
      resources: { cpu: '500m', memory: '256Mi', pids: 64, ephemeralStorage: '32Mi' },
      timeoutSeconds: 20,
      network: { egress: 'none' },
      runtimeClassName: 'kata',
      outputs: ['*.png', 'out/*.csv', '/etc/passwd'],
      ttlSecondsAfterFinished: 600,
      pendingTimeoutSeconds: 120,
    });
    assert.deepEqual(
      spec.env.find((e) => e.name === 'GREETING'),
      { name: 'GREETING', value: 'hi' },
    );
    assert.ok(SandboxRunSpecSchema.safeParse(run.spec).success);
  });

  test('an argv run with no template, stdin or RuntimeClass leaves those fields out', () => {
    const run = buildSandboxRun(
      effective({ image: 'sandpit/bash:5', command: ['sh', '-c', 'echo hi'] }),
      OPTIONS,
    );
    assert.equal(run.spec.template, undefined);
    assert.equal(run.spec.code, undefined);
    assert.equal(run.spec.stdin, undefined);
    assert.equal(run.spec.runtimeClassName, 'gvisor', 'the policy default is written out');
    assert.deepEqual(run.spec.command, ['sh', '-c', 'echo hi']);
  });

  const roundTrips: [string, RunRequestInput][] = [
    ['a python run with every input', FULL],
    ['a bare argv run', { image: 'sandpit/bash:5', command: ['sh', '-c', 'echo hi'] }],
    ['a c run (its argv is a compile-then-run script)', { template: 'c', code: 'int main(){return 0;}' }],
    ['limits at their defaults', { template: 'node', code: 'console.log(1)' }],
    ["a template's default outputs", { template: 'python-data', code: 'print(1)' }],
  ];
  for (const [name, request] of roundTrips) {
    test(`the operator's admission reaches the same effective spec: ${name}`, () => {
      const spec = effective(request);
      const admitted = evaluateRun(buildSandboxRun(spec, OPTIONS).spec, policy, {
        networkPolicyEnforced: false,
      });
      assert.ok(admitted.allowed, !admitted.allowed ? admitted.message : '');
      // The same, but for the bytes of files a run returns, which its ConfigMap caps.
      assert.deepEqual(admitted.effective, withRunFilesCap(spec));
    });
  }

  test('pure: the same input gives the same object', () => {
    const spec = effective(FULL);
    assert.deepEqual(buildSandboxRun(spec, OPTIONS), buildSandboxRun(spec, OPTIONS));
  });
});

test("outputs are always written: a template's default resolved, none as []", () => {
  const data = buildSandboxRun(effective({ template: 'python-data', code: 'print(1)' }), OPTIONS);
  assert.deepEqual(data.spec.outputs, ['*.png', '*.jpg', '*.svg']);
  const none = buildSandboxRun(effective({ template: 'python-data', code: '', outputs: [] }), OPTIONS);
  assert.deepEqual(none.spec.outputs, []);
});
