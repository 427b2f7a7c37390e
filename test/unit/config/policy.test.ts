import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import { RunRequestSchema } from '../../../src/api/run.js';
import { operatorPolicy, policyFromConfig } from '../../../src/config/policy.js';
import { evaluate } from '../../../src/policy/evaluate.js';
import { BUILTIN_TEMPLATES } from '../../../src/policy/templates.js';
import { DEFAULT_CEILINGS } from '../../../src/policy/policy.js';

const MiB = 1024 ** 2;

test('policyFromConfig maps every sandbox ceiling', () => {
  const config = loadConfig({
    env: {
      MAX_CONTAINER_CPU: '2',
      MAX_CONTAINER_MEMORY: '768m',
      CONTAINER_TIMEOUT_SECONDS: '45',
      SANDPIT_SANDBOX_MAX_PIDS: '200',
      SANDPIT_SANDBOX_MAX_WORKSPACE: '100m',
      SANDPIT_SANDBOX_TMP_SIZE: '16m',
      SANDPIT_SANDBOX_MAX_OUTPUT_BYTES: '32k',
      SANDPIT_SANDBOX_MAX_REQUEST_BYTES: '2m',
      SANDPIT_SANDBOX_MAX_DOWNLOAD_BYTES: '16m',
    },
  });
  const p = policyFromConfig(config);
  assert.deepEqual(p.ceilings, {
    cpuMilli: 2000,
    memoryBytes: 768 * MiB,
    pids: 200,
    workspaceBytes: 100 * MiB,
    tmpBytes: 16 * MiB,
    timeoutSeconds: 45,
    outputBytes: 32 * 1024,
    requestBytes: 2 * MiB,
    downloadBytes: 16 * MiB,
    // not configurable: the policy defaults
    files: DEFAULT_CEILINGS.files,
    envVars: DEFAULT_CEILINGS.envVars,
    outputs: DEFAULT_CEILINGS.outputs,
  });
});

test('the default config gives the default ceilings', () => {
  assert.deepEqual(policyFromConfig(loadConfig({ env: {} })).ceilings, DEFAULT_CEILINGS);
});

test('SANDBOX_IMAGE_ALLOWLIST becomes the allowlist; without it the templates’ images plus python:3.11', () => {
  assert.deepEqual(
    policyFromConfig(loadConfig({ env: { SANDBOX_IMAGE_ALLOWLIST: 'python:3.11,sandpit/*' } }))
      .imageAllowlist,
    ['python:3.11', 'sandpit/*'],
  );
  assert.deepEqual(policyFromConfig(loadConfig({ env: {} })).imageAllowlist, [
    ...BUILTIN_TEMPLATES.map((t) => t.image),
    'python:3.11',
  ]);
});

test('sandbox.runtime becomes the default runtime and, alone, the allowed list', () => {
  const p = policyFromConfig(loadConfig({ env: { SANDPIT_SANDBOX_RUNTIME: 'runsc' } }));
  assert.equal(p.defaultRuntime, 'runsc');
  assert.deepEqual(p.allowedRuntimes, ['runsc']);
});

test('sandbox.allowedRuntimes is passed through', () => {
  const p = policyFromConfig(
    loadConfig({ env: { SANDPIT_SANDBOX_RUNTIME: 'runsc', SANDPIT_SANDBOX_ALLOWED_RUNTIMES: 'runc,runsc' } }),
  );
  assert.equal(p.defaultRuntime, 'runsc');
  assert.deepEqual(p.allowedRuntimes, ['runc', 'runsc']);
});

test('no runtime configured: engine default, runc and runsc allowed', () => {
  const p = policyFromConfig(loadConfig({ env: {} }));
  assert.equal(p.defaultRuntime, undefined);
  assert.deepEqual(p.allowedRuntimes, ['runc', 'runsc']);
});

test('DISABLE_NETWORK=false: a run that names no network still has none; an allowlist gets the ceiling', () => {
  const policy = policyFromConfig(
    loadConfig({
      env: { DISABLE_NETWORK: 'false', SANDPIT_SANDBOX_EGRESS_ALLOW: 'pypi.org,10.0.0.0/24:5432' },
    }),
  );
  const request = RunRequestSchema.parse({ template: 'python', code: 'print(1)' });
  const plain = evaluate(request, policy);
  assert.ok(plain.ok);
  assert.deepEqual(plain.spec.network, { egress: 'none' });
  const asked = evaluate(RunRequestSchema.parse({ ...request, network: { egress: 'allowlist' } }), policy);
  assert.ok(asked.ok);
  assert.deepEqual(asked.spec.network, {
    egress: 'allowlist',
    allow: [
      { host: 'pypi.org', ports: [80, 443] },
      { cidr: '10.0.0.0/24', ports: [5432] },
    ],
  });
});

test('DISABLE_NETWORK=true (the default): an allowlist is refused, naming it', () => {
  for (const env of [{}, { DISABLE_NETWORK: 'true', SANDPIT_SANDBOX_EGRESS_ALLOW: 'pypi.org' }]) {
    const policy = policyFromConfig(loadConfig({ env }));
    const request = RunRequestSchema.parse({
      template: 'python',
      code: 'x',
      network: { egress: 'allowlist' },
    });
    const asked = evaluate(request, policy);
    assert.ok(!asked.ok);
    const [first] = asked.violations;
    assert.equal(first?.field, 'network.egress');
    assert.match(first.message, /DISABLE_NETWORK/);
  }
});

test('templates are the built-in ones', () => {
  assert.equal(policyFromConfig(loadConfig({ env: {} })).templates, BUILTIN_TEMPLATES);
});

test('operatorPolicy: RuntimeClasses in place of Docker runtimes, the same ceilings', () => {
  const config = loadConfig({
    env: { SANDPIT_KUBERNETES_RUNTIME_CLASS_NAME: 'gvisor', MAX_CONTAINER_MEMORY: '256m' },
  });
  const p = operatorPolicy(config);
  assert.equal(p.defaultRuntime, 'gvisor');
  assert.deepEqual(p.allowedRuntimes, ['gvisor']);
  assert.equal(p.ceilings.memoryBytes, 256 * MiB);
  const none = operatorPolicy(loadConfig({ env: {} }));
  assert.equal(none.defaultRuntime, undefined);
  assert.deepEqual(none.allowedRuntimes, []);
});
