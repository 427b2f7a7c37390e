import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigSchema, TokenSchema } from '../../../src/config/schema.js';

const MiB = 1024 ** 2;

/** Parses one sandbox value and returns the field, or the issue messages. */
function sandbox(
  key: string,
  value: unknown,
): { ok: true; value: unknown } | { ok: false; messages: string[] } {
  const r = ConfigSchema.safeParse({ sandbox: { [key]: value } });
  if (r.success) return { ok: true, value: (r.data.sandbox as Record<string, unknown>)[key] };
  return { ok: false, messages: r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`) };
}

describe('ConfigSchema leaves accept their text forms', () => {
  const ok: [string, unknown, unknown][] = [
    ['maxCpu', 1, 1000],
    ['maxCpu', '1', 1000],
    ['maxCpu', 0.25, 250],
    ['maxCpu', '100m', 100],
    ['maxMemory', '512m', 512 * MiB],
    ['maxMemory', '512M', 512 * MiB],
    ['maxMemory', '512mb', 512 * MiB],
    ['maxMemory', '512Mi', 512 * MiB],
    ['maxMemory', '1.5g', 1.5 * 1024 * MiB],
    ['maxMemory', 4096, 4096],
    ['maxPids', '64', 64],
    ['maxPids', 8, 8],
    ['timeoutSeconds', ' 7 ', 7],
    ['disableNetwork', 'yes', true],
    ['disableNetwork', false, false],
    ['imageAllowlist', ['a:1', 'b:2'], ['a:1', 'b:2']],
    ['imageAllowlist', 'a:1,b:2', ['a:1', 'b:2']],
    ['maxQueuedRuns', 0, 0],
    ['runtime', 'runsc', 'runsc'],
    ['runtime', 'kata-qemu.v2', 'kata-qemu.v2'],
  ];
  for (const [key, input, want] of ok) {
    test(`sandbox.${key}: ${JSON.stringify(input)} → ${JSON.stringify(want)}`, () => {
      assert.deepEqual(sandbox(key, input), { ok: true, value: want });
    });
  }
});

describe('ConfigSchema rejects with the accepted form', () => {
  const bad: [string, unknown, RegExp][] = [
    ['maxCpu', 0, /expected a CPU amount like 1, 0\.5 or 500m/],
    ['maxCpu', '0m', /expected a CPU amount/],
    ['maxCpu', true, /expected a CPU amount/],
    ['maxCpu', '1 core', /expected a CPU amount/],
    ['maxMemory', 0, /expected a size like 512m, 1g, 256Mi or a number of bytes/],
    ['maxMemory', -5, /expected a size like/],
    ['maxMemory', 1.5, /expected a size like/],
    ['maxMemory', '12 parsecs', /expected a size like/],
    ['maxMemory', null, /expected a size like/],
    ['maxPids', 7, /expected a whole number from 8 to 65536/],
    ['maxPids', 65_537, /expected a whole number from 8 to 65536/],
    ['maxPids', 8.5, /expected a whole number from 8 to 65536/],
    ['timeoutSeconds', 86_401, /expected a whole number from 1 to 86400/],
    ['timeoutSeconds', 'thirty', /expected a whole number from 1 to 86400/],
    ['disableNetwork', 'nah', /expected true or false/],
    ['disableNetwork', 2, /expected true or false/],
    ['imageAllowlist', 5, /expected a list \(YAML list, or comma-separated text\)/],
    ['imageAllowlist', [''], /./],
    ['backend', 'lxc', /expected docker, kubernetes or oci/],
    ['runtime', '-runsc', /expected a runtime name like runsc/],
    ['runtime', 'RUNSC', /expected a runtime name like runsc/],
  ];
  for (const [key, input, form] of bad) {
    test(`sandbox.${key}: ${JSON.stringify(input)} is refused`, () => {
      const r = sandbox(key, input);
      assert.equal(r.ok, false);
      if (!r.ok) {
        assert.equal(r.messages.length, 1, r.messages.join('; '));
        assert.ok(r.messages[0]!.startsWith(`sandbox.${key}`), r.messages[0]);
        assert.match(r.messages[0]!, form);
      }
    });
  }

  test('unknown keys are refused at every level', () => {
    for (const input of [
      { nope: 1 },
      { server: { nope: 1 } },
      { sandbox: { nope: 1 } },
      { logging: { nope: 1 } },
      { docker: { nope: 1 } },
    ]) {
      const r = ConfigSchema.safeParse(input);
      assert.equal(r.success, false, JSON.stringify(input));
      assert.equal(r.error.issues[0]!.code, 'unrecognized_keys');
    }
  });

  test('auth.token needs at least 8 characters', () => {
    const r = ConfigSchema.safeParse({ auth: { token: '1234567' } });
    assert.equal(r.success, false);
    assert.equal(r.error.issues[0]!.message, 'expected at least 8 characters');
    assert.equal(ConfigSchema.parse({ auth: { token: '12345678' } }).auth.token, '12345678');
  });
});

describe('TokenSchema', () => {
  test('a plain token with scopes', () => {
    assert.deepEqual(
      TokenSchema.parse({
        name: 'ci',
        token: 'ci-token-1',
        templates: 'python, bash',
        maxConcurrentRuns: '4',
      }),
      {
        name: 'ci',
        token: 'ci-token-1',
        templates: ['python', 'bash'],
        maxConcurrentRuns: 4,
      },
    );
  });

  test('tokenSha256 must be 64 lowercase hex digits', () => {
    assert.equal(TokenSchema.safeParse({ name: 'a', tokenSha256: 'f'.repeat(64) }).success, true);
    const upper = TokenSchema.safeParse({ name: 'a', tokenSha256: 'F'.repeat(64) });
    assert.equal(upper.success, false);
    assert.match(upper.error.issues[0]!.message, /64 lowercase hex digits/);
    assert.equal(TokenSchema.safeParse({ name: 'a', tokenSha256: 'f'.repeat(63) }).success, false);
  });

  test('exactly one of token and tokenSha256', () => {
    assert.equal(TokenSchema.safeParse({ name: 'a' }).success, false);
    assert.equal(
      TokenSchema.safeParse({ name: 'a', token: 'abcdefgh', tokenSha256: 'f'.repeat(64) }).success,
      false,
    );
  });

  test('a name is required', () => {
    assert.equal(TokenSchema.safeParse({ name: '', token: 'abcdefgh' }).success, false);
    assert.equal(TokenSchema.safeParse({ token: 'abcdefgh' }).success, false);
  });

  test('namespace: a DNS-1123 label, refused otherwise with the accepted form', () => {
    assert.equal(
      TokenSchema.parse({ name: 'a', token: 'abcdefgh', namespace: 'team-a' }).namespace,
      'team-a',
    );
    assert.equal(TokenSchema.parse({ name: 'a', token: 'abcdefgh' }).namespace, undefined);
    for (const bad of ['Team-A', 'team_a', '-team', 'team-', '', 'a'.repeat(64), 'a.b', '../x']) {
      const r = TokenSchema.safeParse({ name: 'a', token: 'abcdefgh', namespace: bad });
      assert.equal(r.success, false, bad);
      assert.match(r.error.issues[0]!.message, /DNS-1123 label/, bad);
    }
    assert.equal(
      TokenSchema.safeParse({ name: 'a', token: 'abcdefgh', namespace: 'a'.repeat(63) }).success,
      true,
    );
  });
});

describe('egress settings', () => {
  const issues = (input: unknown): string[] => {
    const r = ConfigSchema.safeParse(input);
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  test('the ceiling takes text (one entry or comma-separated), JSON and YAML objects', () => {
    const parse = (allow: unknown) =>
      ConfigSchema.parse({ sandbox: { egress: { allow } } }).sandbox.egress.allow;
    assert.deepEqual(parse('pypi.org, 10.0.0.0/24:5432'), ['pypi.org', '10.0.0.0/24:5432']);
    assert.deepEqual(parse('["pypi.org", {"cidr": "10.0.0.0/24"}]'), ['pypi.org', { cidr: '10.0.0.0/24' }]);
    assert.deepEqual(parse([{ host: 'pypi.org', ports: [443] }]), [{ host: 'pypi.org', ports: [443] }]);
    assert.deepEqual(ConfigSchema.parse({}).sandbox.egress, {
      allow: [],
      internalCidrs: [],
      maxConnections: 32,
      maxBytes: 1024 ** 3,
      connectTimeoutSeconds: 10,
      idleTimeoutSeconds: 60,
    });
  });

  test('a malformed entry or range is named', () => {
    assert.deepEqual(issues({ sandbox: { egress: { allow: 'pypi.org,bad host' } } }), [
      'sandbox.egress.allow.1: "bad host" is not a host name (letters, digits, - and dots; IDNs in punycode; "*." only in front)',
    ]);
    assert.match(
      issues({ sandbox: { egress: { internalCidrs: '10.96.0.1/12' } } })[0]!,
      /did you mean 10\.96\.0\.0\/12/,
    );
  });

  test("a token's egress narrows the ceiling, never widens it", () => {
    const config = (egress: unknown) => ({
      sandbox: { egress: { allow: ['pypi.org', '10.0.0.0/16'] } },
      auth: { tokens: [{ name: 'ci', token: 'ci-token-123', egress }] },
    });
    assert.deepEqual(issues(config(['pypi.org:443', '10.0.1.0/24:5432'])), []);
    assert.deepEqual(issues(config('pypi.org,evil.com,pypi.org:22')), [
      'auth.tokens.0.egress.1: not within sandbox.egress.allow (a token narrows the ceiling, never widens it): no entry of the ceiling covers it',
      'auth.tokens.0.egress.2: not within sandbox.egress.allow (a token narrows the ceiling, never widens it): port 22 is not allowed there (the ceiling allows 80,443)',
    ]);
  });
});

describe('HTTP timeouts', () => {
  test('default to 10 s for the headers and 30 s for the whole request', () => {
    const { server } = ConfigSchema.parse({});
    assert.equal(server.headersTimeoutSeconds, 10);
    assert.equal(server.requestTimeoutSeconds, 30);
  });

  test('the headers may not take longer than the whole request (Node refuses it)', () => {
    const r = ConfigSchema.safeParse({ server: { headersTimeoutSeconds: 20, requestTimeoutSeconds: 5 } });
    assert.deepEqual(
      r.error?.issues.map((i) => [i.path.join('.'), i.message]),
      [['server.headersTimeoutSeconds', 'must not be over server.requestTimeoutSeconds']],
    );
  });
});
