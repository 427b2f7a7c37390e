import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  cidr,
  cidrContains,
  cidrWithin,
  formatCidr,
  formatIp,
  parseCidr,
  parseIp,
  unmapIp,
} from '../../../src/shared/ip.js';

describe('parseIp: only the strict forms', () => {
  for (const [text, shown] of [
    ['1.2.3.4', '1.2.3.4'],
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['::1', '::1'],
    ['::', '::'],
    ['2001:DB8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:db8::', '2001:db8::'],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
    ['::ffff:10.0.0.1', '::ffff:10.0.0.1'],
    ['64:ff9b::1.2.3.4', '64:ff9b::102:304'],
  ] as const) {
    test(`${text} → ${shown}`, () => {
      const ip = parseIp(text);
      assert.ok(ip);
      assert.equal(formatIp(ip), shown);
    });
  }

  for (const text of [
    '127.1',
    '0x7f.0.0.1',
    '017.0.0.1',
    '2130706433',
    'fe80::1%eth0',
    '1.2.3.4.5',
    'localhost',
    '',
  ]) {
    test(`${JSON.stringify(text)} is not an address`, () => assert.equal(parseIp(text), undefined));
  }

  test('an IPv4-mapped IPv6 address unmaps to its IPv4 address; others stay', () => {
    assert.equal(formatIp(unmapIp(parseIp('::ffff:127.0.0.1')!)), '127.0.0.1');
    assert.equal(unmapIp(parseIp('::ffff:127.0.0.1')!).family, 4);
    assert.equal(formatIp(unmapIp(parseIp('2001:db8::1')!)), '2001:db8::1');
  });
});

describe('parseCidr', () => {
  test('ranges and single addresses, in canonical form', () => {
    for (const [text, want] of [
      ['10.0.0.0/8', '10.0.0.0/8'],
      ['1.2.3.4', '1.2.3.4/32'],
      ['0.0.0.0/0', '0.0.0.0/0'],
      ['2001:DB8::/32', '2001:db8::/32'],
      ['::1', '::1/128'],
    ]) {
      const p = parseCidr(text!);
      assert.ok(p.ok, text);
      assert.equal(formatCidr(p.cidr), want);
    }
  });

  test('host bits set is refused with the range it may have meant', () => {
    const p = parseCidr('10.0.0.5/24');
    assert.ok(!p.ok);
    assert.match(p.message, /host bits set: did you mean 10\.0\.0\.0\/24\?/);
  });

  for (const text of [
    '10.0.0.0/33',
    '::/129',
    '10.0.0.0/',
    '10.0.0.0/-1',
    '10.0.0.0/8/8',
    'example.com/8',
    '127.1/8',
  ]) {
    test(`${text} is refused`, () => assert.ok(!parseCidr(text).ok));
  }
});

describe('containment', () => {
  test('an address is in a range of its own family only', () => {
    assert.ok(cidrContains(cidr('10.0.0.0/8'), parseIp('10.255.0.1')!));
    assert.ok(!cidrContains(cidr('10.0.0.0/8'), parseIp('11.0.0.1')!));
    assert.ok(!cidrContains(cidr('0.0.0.0/0'), parseIp('::1')!));
    assert.ok(cidrContains(cidr('::/0'), parseIp('::1')!));
    assert.ok(!cidrContains(cidr('::/0'), parseIp('1.2.3.4')!));
  });

  test('a range within another', () => {
    assert.ok(cidrWithin(cidr('10.1.0.0/16'), cidr('10.0.0.0/8')));
    assert.ok(cidrWithin(cidr('10.0.0.0/8'), cidr('10.0.0.0/8')));
    assert.ok(!cidrWithin(cidr('10.0.0.0/8'), cidr('10.1.0.0/16')));
    assert.ok(!cidrWithin(cidr('0.0.0.0/0'), cidr('127.0.0.0/8')));
    assert.ok(cidrWithin(cidr('127.0.0.1/32'), cidr('127.0.0.0/8')));
    assert.ok(!cidrWithin(cidr('::1/128'), cidr('0.0.0.0/0')));
  });
});
