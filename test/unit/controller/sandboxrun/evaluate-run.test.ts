import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { evaluateRun, withRunFilesCap } from '../../../../src/controller/sandboxrun/evaluate-run.js';
import { createPolicy } from '../../../../src/policy/policy.js';
import { evaluate } from '../../../../src/policy/evaluate.js';
import { RunRequestSchema } from '../../../../src/api/run.js';
import { encodeJob } from '../../../../src/runner/protocol.js';

const policy = createPolicy({ imageAllowlist: ['sandpit/*'], allowedRuntimes: ['gvisor'] });
const cluster = { networkPolicyEnforced: false };

describe('evaluateRun: the shared policy decides', () => {
  test('allowed: the same effective spec evaluate() gives the Docker backend, and the encoded job', () => {
    const r = evaluateRun(
      { template: 'python', code: 'print(1)', runtimeClassName: 'gvisor', cancel: false },
      policy,
      cluster,
    );
    assert.ok(r.allowed);
    const direct = evaluate(
      RunRequestSchema.parse({ template: 'python', code: 'print(1)', runtime: 'gvisor' }),
      policy,
    );
    assert.ok(direct.ok);
    assert.deepEqual(r.effective, withRunFilesCap(direct.spec), 'but for the files cap of a ConfigMap');
    assert.ok(r.job.subarray(0, 4).equals(Buffer.from('SPJ3')));
  });

  test('egress none fails closed: the runner refuses a sandbox with a network unless the cluster enforces NetworkPolicy', () => {
    const input = { template: 'python', code: 'print(1)' };
    const direct = evaluate(RunRequestSchema.parse(input), policy);
    assert.ok(direct.ok);
    const undeclared = evaluateRun(input, policy, { networkPolicyEnforced: false });
    assert.ok(undeclared.allowed);
    assert.deepEqual(undeclared.job, encodeJob(direct.spec, { requireNoNetwork: true }));
    const enforced = evaluateRun(input, policy, { networkPolicyEnforced: true });
    assert.ok(enforced.allowed);
    assert.deepEqual(enforced.job, encodeJob(direct.spec, { requireNoNetwork: false }));
    assert.notDeepEqual(undeclared.job, enforced.job);
  });

  test('an image outside the allowlist is denied, naming the field and the limit', () => {
    const r = evaluateRun({ image: 'docker.io/library/alpine:3', command: ['true'] }, policy, cluster);
    assert.equal(r.allowed, false);
    assert.ok(!r.allowed);
    assert.match(
      r.message,
      /^denied by policy: image: image "docker.io\/library\/alpine:3" is not in the allowlist \(limit: sandpit\/\*\)/,
    );
  });

  test('runtime violations are reported as runtimeClassName', () => {
    const r = evaluateRun({ template: 'python', code: '', runtimeClassName: 'kata' }, policy, cluster);
    assert.ok(!r.allowed);
    assert.equal(r.violations[0]?.field, 'runtimeClassName');
  });

  test('a spec the schema refuses (no code or command, bad path) is denied as invalid', () => {
    const r = evaluateRun({ template: 'python' }, policy, cluster);
    assert.ok(!r.allowed);
    assert.match(r.message, /^invalid spec: code: give code or command/);
    const p = evaluateRun(
      { template: 'python', code: '', files: [{ path: '../x', content: '' }] },
      policy,
      cluster,
    );
    assert.ok(!p.allowed);
    assert.match(p.message, /files\.0\.path/);
  });

  test('limits over the ceiling are denied', () => {
    const r = evaluateRun({ template: 'python', code: '', resources: { memory: '4Gi' } }, policy, cluster);
    assert.ok(!r.allowed);
    assert.match(r.message, /resources\.memory: 4Gi is over the ceiling of 512Mi/);
  });

  test('a job too large for a ConfigMap is denied', () => {
    const big = createPolicy({ imageAllowlist: ['sandpit/*'], ceilings: { requestBytes: 8 * 1024 ** 2 } });
    const r = evaluateRun({ template: 'python', code: 'x'.repeat(2 * 1024 ** 2) }, big, cluster);
    assert.ok(!r.allowed);
    assert.match(r.message, /more than a ConfigMap holds/);
  });
});
