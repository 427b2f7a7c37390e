import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  describeNetwork,
  EffectiveNetworkSchema,
  EgressEntryObjectSchema,
  entryText,
  NetworkSchema,
  NetworkSpecSchema,
  parseEntryText,
  toEntry,
} from '../../../src/api/egress.js';

describe('entries as text', () => {
  for (const [text, want] of [
    ['pypi.org', { host: 'pypi.org', ports: [80, 443] }],
    ['PyPI.org.', { host: 'pypi.org', ports: [80, 443] }],
    ['pypi.org:8443', { host: 'pypi.org', ports: [8443] }],
    ['*.githubusercontent.com', { host: '*.githubusercontent.com', ports: [80, 443] }],
    ['localhost:3000', { host: 'localhost', ports: [3000] }],
    ['10.0.0.0/24', { cidr: '10.0.0.0/24' }],
    ['10.0.0.0/24:5432', { cidr: '10.0.0.0/24', ports: [5432] }],
    ['192.0.2.7', { cidr: '192.0.2.7/32' }],
    ['192.0.2.7:22', { cidr: '192.0.2.7/32', ports: [22] }],
    ['2001:db8::/32', { cidr: '2001:db8::/32' }],
    ['[2001:db8::/32]:443', { cidr: '2001:db8::/32', ports: [443] }],
    ['[::1]:8080', { cidr: '::1/128', ports: [8080] }],
  ] as const) {
    test(`${text}`, () => {
      const parsed = parseEntryText(text);
      assert.ok(parsed.ok, JSON.stringify(parsed));
      assert.deepEqual(parsed.entry, want);
    });
  }

  for (const [text, why] of [
    ['', /not a host name/],
    ['*', /not a host name/],
    ['*.com', /whole top-level domain/],
    ['a.*.example.com', /not a host name/],
    ['pypi.org:0', /not a port/],
    ['pypi.org:65536', /not a port/],
    ['pypi.org:http', /not a port/],
    ['10.0.0.5/24', /host bits set: did you mean 10\.0\.0\.0\/24/],
    ['127.1', /not an IPv4 or IPv6 address/],
    ['1.2.3', /not an IPv4 or IPv6 address/],
    ['exa mple.com', /not a host name/],
    ['ex_ample.com', /not a host name/],
    ['bücher.example', /not a host name/],
    ['[2001:db8::1', /not \[address\]:port/],
    ['[2001:db8::1]443', /not \[address\]:port/],
    ['example.123', /looks like an IP address/],
  ] as const) {
    test(`${JSON.stringify(text)} is refused`, () => {
      const parsed = parseEntryText(text);
      assert.ok(!parsed.ok);
      assert.match(parsed.message, why);
    });
  }
});

describe('entries as objects', () => {
  test('exactly one of host or cidr', () => {
    assert.ok(!EgressEntryObjectSchema.safeParse({ host: 'a.org', cidr: '10.0.0.0/8' }).success);
    assert.ok(!EgressEntryObjectSchema.safeParse({ ports: [443] }).success);
    assert.ok(!EgressEntryObjectSchema.safeParse({ host: 'a.org', extra: 1 }).success);
  });

  test('canonical: lowercase, ports sorted and unique, ranges in canonical notation', () => {
    assert.deepEqual(toEntry({ host: 'API.Example.com', ports: [443, 80, 443] }), {
      host: 'api.example.com',
      ports: [80, 443],
    });
    assert.deepEqual(toEntry({ cidr: '2001:DB8:0::/48' }), { cidr: '2001:db8::/48' });
  });

  test('written back as one line', () => {
    assert.equal(entryText(toEntry('pypi.org')), 'pypi.org:80,443');
    assert.equal(entryText(toEntry('10.0.0.0/8')), '10.0.0.0/8');
    assert.equal(entryText(toEntry('[2001:db8::/32]:443')), '[2001:db8::/32]:443');
  });
});

describe('the network of a request', () => {
  test('none by default; allow only with allowlist, and not empty', () => {
    assert.deepEqual(NetworkSchema.parse({}), { egress: 'none' });
    assert.ok(!NetworkSchema.safeParse({ egress: 'none', allow: ['pypi.org'] }).success);
    assert.ok(!NetworkSchema.safeParse({ egress: 'allowlist', allow: [] }).success);
    assert.ok(!NetworkSchema.safeParse({ egress: 'all' }).success);
    assert.ok(NetworkSchema.safeParse({ egress: 'allowlist' }).success);
  });

  test('a request takes text and objects; a stored spec objects only', () => {
    const asked = { egress: 'allowlist', allow: ['pypi.org', { cidr: '10.0.0.0/24', ports: [5432] }] };
    assert.ok(NetworkSchema.safeParse(asked).success);
    assert.ok(!NetworkSpecSchema.safeParse(asked).success);
    assert.ok(NetworkSpecSchema.safeParse({ egress: 'allowlist', allow: [{ host: 'pypi.org' }] }).success);
  });

  test('each malformed entry is reported at its own path', () => {
    const r = NetworkSchema.safeParse({
      egress: 'allowlist',
      allow: ['ok.org', 'bad host', { cidr: '1.2.3.4/40' }],
    });
    assert.ok(!r.success);
    assert.deepEqual(
      r.error.issues.map((i) => i.path.join('.')),
      ['allow.1', 'allow.2'],
    );
  });

  test('64 entries at most', () => {
    const allow = Array.from({ length: 65 }, (_, i) => `h${i}.example.com`);
    assert.ok(!NetworkSchema.safeParse({ egress: 'allowlist', allow }).success);
  });
});

describe('an effective network read back', () => {
  test('the old "none" record, and an allowlist made canonical', () => {
    assert.deepEqual(EffectiveNetworkSchema.parse('none'), { egress: 'none' });
    assert.deepEqual(EffectiveNetworkSchema.parse({ egress: 'allowlist', allow: [{ host: 'A.org' }] }), {
      egress: 'allowlist',
      allow: [{ host: 'a.org', ports: [80, 443] }],
    });
    assert.ok(
      !EffectiveNetworkSchema.safeParse({ egress: 'allowlist', allow: [{ host: 'bad host' }] }).success,
    );
  });

  test('described in one line', () => {
    assert.equal(describeNetwork({ egress: 'none' }), 'none');
    assert.equal(
      describeNetwork({ egress: 'allowlist', allow: [toEntry('pypi.org'), toEntry('10.0.0.0/24')] }),
      'allowlist: pypi.org:80,443, 10.0.0.0/24',
    );
  });
});
