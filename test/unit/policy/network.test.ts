import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toEntry, type EgressEntryInput } from '../../../src/api/egress.js';
import { RunRequestSchema } from '../../../src/api/run.js';
import { SessionRequestSchema } from '../../../src/api/session.js';
import type { Scope } from '../../../src/policy/decision.js';
import { entryCovers, hostCovers, hostMatches } from '../../../src/policy/egress-rules.js';
import { evaluate } from '../../../src/policy/evaluate.js';
import { createPolicy, type Policy } from '../../../src/policy/policy.js';
import { evaluateSession } from '../../../src/policy/session.js';
import type { Violation } from '../../../src/shared/errors.js';

const CEILING = [
  'pypi.org',
  'files.pythonhosted.org:443',
  '*.example.com',
  '10.0.0.0/24:5432',
  '2001:db8::/32',
].map(toEntry);

const open = (ceiling = CEILING): Policy => createPolicy({ egress: { disabled: false, ceiling } });

function run(allow: EgressEntryInput[] | undefined, policy = open(), scope?: Scope) {
  return evaluate(
    RunRequestSchema.parse({
      template: 'python',
      code: 'x',
      network: { egress: 'allowlist', ...(allow ? { allow } : {}) },
    }),
    policy,
    scope,
  );
}

function denied(allow: EgressEntryInput[] | undefined, policy = open(), scope?: Scope): Violation[] {
  const r = run(allow, policy, scope);
  assert.ok(!r.ok, 'expected violations');
  return r.violations;
}

describe('matching names', () => {
  test('an exact name matches itself only', () => {
    assert.ok(hostMatches('pypi.org', 'pypi.org'));
    assert.ok(!hostMatches('pypi.org', 'x.pypi.org'));
    assert.ok(!hostMatches('pypi.org', 'pypi.org.evil.com'));
  });

  test('a wildcard matches every name below its domain, at any depth, never the domain itself', () => {
    assert.ok(hostMatches('*.example.com', 'a.example.com'));
    assert.ok(hostMatches('*.example.com', 'a.b.example.com'));
    assert.ok(!hostMatches('*.example.com', 'example.com'));
    assert.ok(!hostMatches('*.example.com', 'badexample.com'));
    assert.ok(!hostMatches('*.example.com', 'example.com.evil.org'));
  });

  test('a wildcard covers narrower wildcards; a name never covers a wildcard', () => {
    assert.ok(hostCovers('*.example.com', '*.example.com'));
    assert.ok(hostCovers('*.example.com', '*.a.example.com'));
    assert.ok(!hostCovers('*.a.example.com', '*.example.com'));
    assert.ok(!hostCovers('a.example.com', '*.a.example.com'));
  });

  test('ports: a cidr without ports covers every port; a host never covers a range', () => {
    assert.ok(entryCovers(toEntry('10.0.0.0/8'), toEntry('10.1.0.0/16:22')));
    assert.ok(!entryCovers(toEntry('10.0.0.0/8:22'), toEntry('10.1.0.0/16')));
    assert.ok(!entryCovers(toEntry('example.com'), toEntry('93.184.216.34')));
  });
});

describe('DISABLE_NETWORK', () => {
  test('on (the default policy): an allowlist is refused, naming the setting', () => {
    const v = denied(['pypi.org'], createPolicy());
    assert.equal(v.length, 1);
    assert.equal(v[0]!.field, 'network.egress');
    assert.match(v[0]!.message, /DISABLE_NETWORK is true \(sandbox\.disableNetwork\)/);
  });

  test('on, even with a ceiling', () => {
    const policy = createPolicy({ egress: { disabled: true, ceiling: CEILING } });
    assert.match(denied(undefined, policy)[0]!.message, /DISABLE_NETWORK/);
  });

  test('off: a run that names no network still has none', () => {
    const r = evaluate(RunRequestSchema.parse({ template: 'python', code: 'x' }), open());
    assert.ok(r.ok);
    assert.deepEqual(r.spec.network, { egress: 'none' });
  });
});

describe('an allowlist within the ceiling', () => {
  test('names none: the whole ceiling', () => {
    const r = run(undefined);
    assert.ok(r.ok);
    assert.deepEqual(r.spec.network, { egress: 'allowlist', allow: CEILING });
  });

  test('names a part: exactly that part, canonical and without repeats', () => {
    const r = run([
      'PyPI.org:443',
      'a.b.example.com',
      '*.x.example.com:443',
      { cidr: '10.0.0.128/25', ports: [5432] },
      '[2001:db8:1::/48]:443',
      'pypi.org:443',
    ]);
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(r.spec.network, {
      egress: 'allowlist',
      allow: [
        { host: 'pypi.org', ports: [443] },
        { host: 'a.b.example.com', ports: [80, 443] },
        { host: '*.x.example.com', ports: [443] },
        { cidr: '10.0.0.128/25', ports: [5432] },
        { cidr: '2001:db8:1::/48', ports: [443] },
      ],
    });
  });

  test('never widens it: every refused entry at once, each naming the entry and the rule', () => {
    const v = denied([
      'pypi.org', // fine
      'pypi.org:22',
      'files.pythonhosted.org',
      'evil.com',
      'example.com',
      '10.0.0.0/16:5432',
      '10.0.0.0/24',
      '93.184.216.34',
    ]);
    assert.deepEqual(
      v.map((x) => [x.field, x.requested]),
      [
        ['network.allow.1', 'pypi.org:22'],
        ['network.allow.2', 'files.pythonhosted.org:80,443'],
        ['network.allow.3', 'evil.com:80,443'],
        ['network.allow.4', 'example.com:80,443'],
        ['network.allow.5', '10.0.0.0/16:5432'],
        ['network.allow.6', '10.0.0.0/24'],
        ['network.allow.7', '93.184.216.34/32'],
      ],
    );
    for (const x of v) assert.match(x.message, /is not within the egress ceiling \(sandbox\.egress\.allow\)/);
    assert.match(v[0]!.message, /port 22 is not allowed there \(the ceiling allows 80,443\)/);
    assert.match(v[1]!.message, /port 80 is not allowed there \(the ceiling allows 443\)/);
    assert.match(v[2]!.message, /no entry of the ceiling covers it/);
    assert.match(v[5]!.message, /allows it on ports 5432 only, not every port/);
    assert.match(
      v[0]!.limit as string,
      /^pypi\.org:80,443, files\.pythonhosted\.org:443, \*\.example\.com:80,443/,
    );
  });

  test('an empty ceiling grants nothing', () => {
    const v = denied(undefined, open([]));
    assert.equal(v[0]!.field, 'network.egress');
    assert.match(v[0]!.message, /the egress ceiling names no destination \(sandbox\.egress\.allow\)/);
    assert.equal(denied(['pypi.org'], open([]))[0]!.field, 'network.allow.0');
  });
});

describe("a token's ceiling narrows the config's", () => {
  const scope: Scope = { egress: ['pypi.org:443', '10.0.0.0/24:5432'].map(toEntry) };

  test("names none: the token's ceiling", () => {
    const r = run(undefined, open(), scope);
    assert.ok(r.ok);
    assert.deepEqual(r.spec.network, { egress: 'allowlist', allow: scope.egress });
  });

  test('an entry within the config but beyond the token is refused, naming the token rule', () => {
    const v = denied(['pypi.org', '*.example.com', 'pypi.org:443'], open(), scope);
    assert.deepEqual(
      v.map((x) => x.field),
      ['network.allow.0', 'network.allow.1'],
    );
    for (const x of v) assert.match(x.message, /\(auth\.tokens\[\]\.egress\)/);
  });

  test('the config still rules: an entry beyond it names the config', () => {
    const wide: Scope = { egress: [toEntry('evil.com')] };
    assert.match(denied(['evil.com'], open(), wide)[0]!.message, /\(sandbox\.egress\.allow\)/);
    // Named none: only the token entries within the config count.
    assert.match(
      denied(undefined, open(), wide)[0]!.message,
      /names no destination \(auth\.tokens\[\]\.egress\)/,
    );
  });
});

describe('sessions are decided the same way', () => {
  test('an allowlist session within the ceiling', () => {
    const r = evaluateSession(
      SessionRequestSchema.parse({
        template: 'python',
        network: { egress: 'allowlist', allow: ['pypi.org:443'] },
      }),
      open(),
    );
    assert.ok(r.ok);
    assert.deepEqual(r.spec.network, { egress: 'allowlist', allow: [{ host: 'pypi.org', ports: [443] }] });
  });

  test('beyond it, refused', () => {
    const r = evaluateSession(
      SessionRequestSchema.parse({
        template: 'python',
        network: { egress: 'allowlist', allow: ['evil.com'] },
      }),
      open(),
    );
    assert.ok(!r.ok);
    assert.equal(r.violations[0]!.field, 'network.allow.0');
  });
});
