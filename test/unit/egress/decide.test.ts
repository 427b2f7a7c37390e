import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toEntry, type EffectiveNetwork } from '../../../src/api/egress.js';
import {
  decideAddress,
  decideTarget,
  parseAuthority,
  targetText,
  type Target,
  type Verdict,
} from '../../../src/egress/decide.js';
import { buildFloor, floorHits } from '../../../src/egress/floor.js';
import { cidr, parseIp, unmapIp } from '../../../src/shared/ip.js';

const allow = (...entries: string[]): EffectiveNetwork => ({
  egress: 'allowlist',
  allow: entries.map(toEntry),
});
const ip = (t: string) => unmapIp(parseIp(t)!);
const target = (t: string): Target => {
  const parsed = parseAuthority(t);
  assert.ok(parsed, t);
  return parsed;
};
const denied = (v: Verdict) => {
  assert.ok(!v.allowed, JSON.stringify(v));
  return v;
};

describe('what a request names', () => {
  test('names and literal addresses, ports required for CONNECT', () => {
    assert.deepEqual(parseAuthority('PyPI.org:443'), { kind: 'name', host: 'pypi.org', port: 443 });
    assert.equal(targetText(target('[::ffff:127.0.0.1]:80')), '127.0.0.1:80');
    assert.equal(targetText(target('[2001:db8::1]:443')), '[2001:db8::1]:443');
    assert.equal(targetText(target('1.2.3.4:8080')), '1.2.3.4:8080');
    assert.deepEqual(parseAuthority('example.com', 80), { kind: 'name', host: 'example.com', port: 80 });
  });

  for (const bad of [
    'pypi.org',
    'pypi.org:0',
    'pypi.org:99999',
    '2001:db8::1:443',
    '[pypi.org]:443',
    '[1.2.3.4]:443',
    '127.1:80',
    '0x7f000001:80',
    'a b:80',
    '*.example.com:443',
    'user@host:443',
    ':443',
    '',
  ]) {
    test(`${JSON.stringify(bad)} is not a target`, () => assert.equal(parseAuthority(bad), undefined));
  }
});

describe('the allowlist decides names and addresses on ports', () => {
  const net = allow('pypi.org', '*.example.com:8443', '10.0.0.0/24:5432', '2001:db8::/32');

  test('allowed, naming the entry', () => {
    assert.deepEqual(decideTarget(net, target('pypi.org:443')), {
      allowed: true,
      rule: 'allow pypi.org:80,443',
    });
    assert.ok(decideTarget(net, target('a.b.example.com:8443')).allowed);
    assert.ok(decideTarget(net, target('10.0.0.7:5432')).allowed);
    assert.ok(decideTarget(net, target('[2001:db8::5]:22')).allowed);
    assert.ok(decideTarget(net, target('[::ffff:10.0.0.7]:5432')).allowed);
  });

  test('a name not in the list, or on another port', () => {
    assert.equal(denied(decideTarget(net, target('evil.com:443'))).reason, 'not-allowed');
    const port = denied(decideTarget(net, target('pypi.org:22')));
    assert.equal(port.reason, 'port');
    assert.equal(port.rule, 'port 22 is not allowed for pypi.org (allowed: 80,443)');
    assert.equal(denied(decideTarget(net, target('example.com:8443'))).reason, 'not-allowed');
  });

  test('literal addresses match ranges only, never names', () => {
    assert.equal(denied(decideTarget(net, target('10.0.0.7:80'))).reason, 'not-allowed');
    assert.equal(denied(decideTarget(net, target('1.1.1.1:443'))).reason, 'not-allowed');
    assert.equal(denied(decideTarget(net, target('[2606:4700::1111]:443'))).reason, 'not-allowed');
    assert.equal(denied(decideTarget(allow('1.1.1.1'), target('one.one.one.one:443'))).reason, 'not-allowed');
  });

  test('egress none refuses everything', () => {
    assert.equal(denied(decideTarget({ egress: 'none' }, target('pypi.org:443'))).reason, 'no-egress');
  });
});

describe('the SSRF floor', () => {
  const floor = buildFloor({
    ownAddresses: [ip('192.0.2.10'), ip('2001:db8::10')],
    internalCidrs: [cidr('10.96.0.0/12')],
  });
  const open = allow('pypi.org');

  for (const address of [
    '127.0.0.1',
    '127.255.0.9',
    '0.0.0.0',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '169.254.169.254',
    '169.254.1.1',
    '100.100.100.200',
    '168.63.129.16',
    '224.0.0.1',
    '255.255.255.255',
    '192.0.2.10',
    '::',
    '::1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'ff02::1',
    'fd00:ec2::254',
    '::ffff:127.0.0.1',
    '::ffff:169.254.169.254',
    '64:ff9b::a00:1',
    '64:ff9b::127.0.0.1',
    '2002:7f00:1::',
    '2002:a9fe:a9fe::1',
    '::7f00:1',
    '2001:db8::10',
  ]) {
    test(`${address} is refused even for an allowed name`, () => {
      const v = denied(decideAddress(open, floor, ip(address)));
      assert.equal(v.reason, 'floor');
      assert.match(v.rule, /is in the SSRF floor: /);
    });
  }

  test('the internal ranges from config (pod and service CIDRs)', () => {
    assert.match(
      denied(decideAddress(open, floor, ip('10.100.0.1'))).rule,
      /internal \(sandbox\.egress\.internalCidrs\)/,
    );
  });

  for (const address of [
    '1.1.1.1',
    '93.184.216.34',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700::1111',
    '64:ff9b::101:101',
  ]) {
    test(`${address} passes`, () => assert.ok(decideAddress(open, floor, ip(address)).allowed));
  }

  test('a range is lifted only by an entry that names it explicitly', () => {
    const loop = allow('pypi.sandpit.test', '127.0.0.1/32');
    assert.ok(decideAddress(loop, buildFloor(), ip('127.0.0.1')).allowed);
    assert.ok(!decideAddress(loop, buildFloor(), ip('127.0.0.2')).allowed);
    // A wider range than the floor range lifts nothing.
    assert.ok(!decideAddress(allow('0.0.0.0/0'), floor, ip('10.1.2.3')).allowed);
    assert.ok(!decideAddress(allow('::/0'), floor, ip('::1')).allowed);
    // 10.0.0.0/24 is inside RFC 1918's 10.0.0.0/8: lifted for its addresses.
    assert.ok(decideAddress(allow('10.0.0.0/24:5432'), floor, ip('10.0.0.5')).allowed);
    // link-local /16 does not name the metadata address, which is a /32 range of its own.
    assert.ok(decideAddress(allow('169.254.0.0/16'), floor, ip('169.254.1.1')).allowed);
    assert.ok(!decideAddress(allow('169.254.0.0/16'), floor, ip('169.254.169.254')).allowed);
    assert.ok(decideAddress(allow('169.254.169.254'), floor, ip('169.254.169.254')).allowed);
    // The host's own address needs its own /32.
    assert.ok(!decideAddress(allow('192.0.2.0/24'), floor, ip('192.0.2.10')).allowed);
    assert.ok(decideAddress(allow('::1'), floor, ip('::1')).allowed);
  });

  test('an IPv4 address inside IPv6 (NAT64, 6to4) is never lifted', () => {
    assert.ok(!decideAddress(allow('127.0.0.1', '64:ff9b::/96'), floor, ip('64:ff9b::127.0.0.1')).allowed);
    assert.equal(floorHits(floor, ip('2002:7f00:1::')).length, 1);
  });
});
