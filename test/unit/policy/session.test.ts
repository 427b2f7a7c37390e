import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ExecRequestSchema, SessionRequestSchema } from '../../../src/api/session.js';
import { createPolicy } from '../../../src/policy/policy.js';
import { evaluateExec, evaluateSession, type EffectiveSessionSpec } from '../../../src/policy/session.js';

const policy = createPolicy({ ceilings: { timeoutSeconds: 60 }, sessions: { maxTtlSeconds: 7200 } });

function session(input: unknown): EffectiveSessionSpec {
  const e = evaluateSession(SessionRequestSchema.parse(input), policy);
  assert.ok(e.ok, JSON.stringify(!e.ok && e.violations));
  return e.spec;
}

describe('evaluateSession', () => {
  test("the seed's session: the image, the exec default from timeout, the lifetime defaults", () => {
    const s = session({ image: 'python:3.11', timeoutSeconds: 30 });
    assert.equal(s.image, 'python:3.11');
    assert.equal(s.template, undefined);
    assert.equal(s.limits.timeoutSeconds, 30);
    assert.equal(s.ttlSeconds, 3600);
    assert.equal(s.idleTimeoutSeconds, 600);
    assert.equal(s.maxExecs, 16);
    assert.deepEqual(s.network, { egress: 'none' });
  });

  test('a template: its image, its variables under the request’s, secrets apart', () => {
    const s = session({
      template: 'python',
      env: [{ name: 'PYTHONUNBUFFERED', value: '0' }],
      secrets: [{ name: 'API_KEY', value: 'k' }],
    });
    assert.equal(s.image, 'sandpit/python:3.11');
    assert.equal(s.env.find((e) => e.name === 'PYTHONUNBUFFERED')?.value, '0');
    assert.deepEqual(s.secrets, [{ name: 'API_KEY', value: 'k' }]);
    assert.ok(!s.env.some((e) => e.name === 'API_KEY'));
  });

  test('every violation at once: image, lifetime, exec default, limits', () => {
    const e = evaluateSession(
      SessionRequestSchema.parse({
        image: 'alpine:3',
        ttlSeconds: 86_400,
        timeoutSeconds: 3600,
        resources: { memory: '8g' },
      }),
      policy,
    );
    assert.ok(!e.ok);
    assert.deepEqual(e.violations.map((v) => v.field).sort(), [
      'image',
      'resources.memory',
      'timeoutSeconds',
      'ttlSeconds',
    ]);
  });

  test('a token’s template scope narrows what a session may run', () => {
    const e = evaluateSession(SessionRequestSchema.parse({ template: 'c' }), policy, {
      templates: ['python'],
    });
    assert.ok(!e.ok && e.violations.some((v) => v.field === 'template'));
  });
});

describe('evaluateExec', () => {
  const s = session({ template: 'python', timeoutSeconds: 20 });
  const exec = (input: unknown) => evaluateExec(ExecRequestSchema.parse(input), s, policy);

  test("an argv, the session's default deadline, the workspace as cwd", () => {
    const e = exec({ command: ['python', 'script.py'] });
    assert.ok(e.ok);
    assert.deepEqual(e.exec.argv, ['python', 'script.py']);
    assert.equal(e.exec.timeoutSeconds, 20);
    assert.equal(e.exec.cwd, '');
    assert.equal(e.exec.background, false);
  });

  test('a shell line runs under /bin/sh -c; a cwd under /workspace becomes relative', () => {
    const e = exec({ shell: 'ls | wc -l', cwd: '/workspace/src' });
    assert.ok(e.ok);
    assert.deepEqual(e.exec.argv, ['/bin/sh', '-c', 'ls | wc -l']);
    assert.equal(e.exec.cwd, 'src');
  });

  test('a deadline over the ceiling is refused, naming it; a shorter one is kept', () => {
    const over = exec({ command: ['true'], timeoutSeconds: 61 });
    assert.ok(
      !over.ok && over.violations[0]?.field === 'timeoutSeconds' && over.violations[0].limit === '60s',
    );
    const short = exec({ command: ['true'], timeoutSeconds: 2 });
    assert.ok(short.ok && short.exec.timeoutSeconds === 2);
  });
});

describe("a backend's floors", () => {
  test('an idle timeout under the floor is refused naming the field; at the floor it passes', () => {
    const floors = { minIdleTimeoutSeconds: 60 };
    const under = evaluateSession(
      SessionRequestSchema.parse({ template: 'python', idleTimeoutSeconds: 59 }),
      policy,
      {},
      floors,
    );
    assert.ok(!under.ok);
    assert.deepEqual(
      under.violations.map((v) => v.field),
      ['idleTimeoutSeconds'],
    );
    const at = evaluateSession(
      SessionRequestSchema.parse({ template: 'python', idleTimeoutSeconds: 60 }),
      policy,
      {},
      floors,
    );
    assert.ok(at.ok);
    const none = evaluateSession(
      SessionRequestSchema.parse({ template: 'python', idleTimeoutSeconds: 5 }),
      policy,
    );
    assert.ok(none.ok, 'no floor: Docker enforces any idle timeout');
  });
});
