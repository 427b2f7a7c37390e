import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { evaluateRun } from '../../../../src/controller/sandboxrun/evaluate-run.js';
import { evaluatePool, poolShapeLabel } from '../../../../src/controller/sandboxpool/evaluate-pool.js';
import { createPolicy } from '../../../../src/policy/policy.js';

const policy = createPolicy({ allowedRuntimes: ['gvisor'] });

function allowed(spec: Record<string, unknown>) {
  const v = evaluatePool(spec, policy);
  if (!v.allowed) throw new Error(v.message);
  return v;
}

describe('evaluatePool', () => {
  test('a run of the same template, resources and runtime has the pool shape label', () => {
    const pool = allowed({
      template: 'python',
      resources: { cpu: '500m', memory: '256Mi' },
      runtimeClassName: 'gvisor',
    });
    const run = evaluateRun(
      {
        template: 'python',
        code: 'print(1)',
        env: [{ name: 'A', value: 'b' }],
        resources: { cpu: '500m', memory: '256Mi' },
        runtimeClassName: 'gvisor',
      },
      policy,
      { networkPolicyEnforced: true },
    );
    assert.ok(run.allowed);
    assert.equal(poolShapeLabel(run.effective, 'run'), pool.shapeLabel);
    assert.match(pool.shapeLabel, /^[0-9a-f]{32}$/);
  });

  test('the defaults are the policy defaults; replicas 1, mode run, maxIdleSeconds 3600', () => {
    const v = allowed({ template: 'bash' });
    assert.equal(v.spec.mode, 'run');
    assert.equal(v.spec.replicas, 1);
    assert.equal(v.spec.maxIdleSeconds, 3600);
    assert.equal(v.effective.limits.memoryBytes, policy.ceilings.memoryBytes);
  });

  test('every limit and the mode is part of the shape', () => {
    const base = allowed({ template: 'python', resources: { memory: '256Mi' } }).shapeLabel;
    const others = [
      { template: 'python', resources: { memory: '128Mi' } },
      { template: 'python', resources: { memory: '256Mi', cpu: '250m' } },
      { template: 'python', resources: { memory: '256Mi', pids: 64 } },
      { template: 'python', resources: { memory: '256Mi', ephemeralStorage: '16Mi' } },
      { template: 'python', resources: { memory: '256Mi' }, runtimeClassName: 'gvisor' },
      { template: 'python', resources: { memory: '256Mi' }, mode: 'session' },
      { template: 'bash', resources: { memory: '256Mi' } },
    ];
    const labels = new Set(others.map((o) => allowed(o).shapeLabel));
    assert.equal(labels.size, others.length);
    assert.equal(labels.has(base), false);
    // What is not the shape: how many pods, for how long.
    assert.equal(
      allowed({ template: 'python', resources: { memory: '256Mi' }, replicas: 9, maxIdleSeconds: 60 })
        .shapeLabel,
      base,
    );
  });

  test('a spec over a ceiling, an image off the allowlist or an unknown runtime is denied, naming the spec field', () => {
    const memory = evaluatePool({ template: 'python', resources: { memory: '8Gi' } }, policy);
    assert.equal(memory.allowed, false);
    assert.match(memory.message, /^denied by policy: .*memory/);
    const image = evaluatePool({ image: 'evil/miner:1' }, policy);
    assert.equal(image.allowed, false);
    const runtime = evaluatePool({ template: 'python', runtimeClassName: 'kata' }, policy);
    assert.equal(runtime.allowed, false);
    assert.ok(!runtime.allowed && runtime.violations.some((v) => v.field === 'runtimeClassName'));
  });

  test('an invalid spec is denied', () => {
    for (const spec of [
      {},
      { template: 'python', replicas: -1 },
      { template: 'python', mode: 'batch' },
      { template: 'python', code: 'x' },
    ]) {
      const v = evaluatePool(spec, policy);
      assert.equal(v.allowed, false, JSON.stringify(spec));
      assert.match(v.allowed ? '' : v.message, /^invalid spec: /);
    }
  });
});
