/**
 * IP addresses and CIDR ranges as numbers, strictly parsed: only the forms `net.isIP` accepts
 * (dotted-quad IPv4, RFC 4291 IPv6), never `127.1`, `0x7f.0.0.1` or a zone id, so that what a
 * policy names and what a proxy dials are compared as the same value. Pure.
 */
import { isIP } from 'node:net';

export type IpFamily = 4 | 6;

export interface IpAddress {
  family: IpFamily;
  value: bigint;
}

export interface Cidr {
  family: IpFamily;
  /** The network address (host bits zero). */
  value: bigint;
  prefix: number;
}

const BITS: Record<IpFamily, number> = { 4: 32, 6: 128 };

export function parseIp(text: string): IpAddress | undefined {
  if (text.includes('%')) return undefined;
  const family = isIP(text);
  if (family === 4) return { family: 4, value: ipv4Value(text) };
  if (family === 6) return { family: 6, value: ipv6Value(text) };
  return undefined;
}

function ipv4Value(text: string): bigint {
  return text.split('.').reduce((n, octet) => (n << 8n) | BigInt(Number(octet)), 0n);
}

function ipv6Value(text: string): bigint {
  let groups: string[];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let tail: bigint | undefined;
  if (v4) {
    tail = ipv4Value(v4[1]!);
    text = `${text.slice(0, -v4[1]!.length)}0:0`;
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  if (rest === undefined) groups = left;
  else {
    const right = rest === '' ? [] : rest.split(':');
    groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  }
  let value = groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
  if (tail !== undefined) value = (value & ~0xffffffffn) | tail;
  return value;
}

/** An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it is; others unchanged. */
export function unmapIp(ip: IpAddress): IpAddress {
  if (ip.family === 6 && ip.value >> 32n === 0xffffn) return { family: 4, value: ip.value & 0xffffffffn };
  return ip;
}

export function formatIp(ip: IpAddress): string {
  if (ip.family === 4) {
    return [24n, 16n, 8n, 0n].map((s) => String((ip.value >> s) & 0xffn)).join('.');
  }
  if (ip.value >> 32n === 0xffffn) return `::ffff:${formatIp({ family: 4, value: ip.value & 0xffffffffn })}`;
  const groups = Array.from({ length: 8 }, (_, i) => Number((ip.value >> BigInt(112 - 16 * i)) & 0xffffn));
  // RFC 5952: the longest run of two or more zero groups (the first of equal runs) becomes `::`.
  let best = { at: -1, len: 1 };
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.at < 0) return hex.join(':');
  return `${hex.slice(0, best.at).join(':')}::${hex.slice(best.at + best.len).join(':')}`;
}

const mask = (family: IpFamily, prefix: number): bigint => {
  const bits = BigInt(BITS[family]);
  return ((1n << bits) - 1n) ^ ((1n << (bits - BigInt(prefix))) - 1n);
};

export type CidrParse = { ok: true; cidr: Cidr } | { ok: false; message: string };

/**
 * `10.0.0.0/24`, `2001:db8::/32`, or a bare address (a /32 or /128). Host bits must be zero: a
 * range written as `10.0.0.5/24` is refused with the range it may have meant, never guessed.
 */
export function parseCidr(text: string): CidrParse {
  const slash = text.indexOf('/');
  const addressText = slash < 0 ? text : text.slice(0, slash);
  const ip = parseIp(addressText);
  if (!ip) return { ok: false, message: `"${addressText}" is not an IPv4 or IPv6 address` };
  const max = BITS[ip.family];
  let prefix = max;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > max)
      return { ok: false, message: `"/${p}" is not a prefix length from 0 to ${max}` };
    prefix = Number(p);
  }
  const network = ip.value & mask(ip.family, prefix);
  const cidr: Cidr = { family: ip.family, value: network, prefix };
  if (network !== ip.value)
    return { ok: false, message: `"${text}" has host bits set: did you mean ${formatCidr(cidr)}?` };
  return { ok: true, cidr };
}

/** A range written in its canonical form; a single address keeps its /32 or /128. */
export function formatCidr(c: Cidr): string {
  return `${formatIp({ family: c.family, value: c.value })}/${c.prefix}`;
}

export function cidrContains(c: Cidr, ip: IpAddress): boolean {
  return c.family === ip.family && (ip.value & mask(c.family, c.prefix)) === c.value;
}

/** True when every address of `inner` is in `outer`. */
export function cidrWithin(inner: Cidr, outer: Cidr): boolean {
  return (
    inner.family === outer.family &&
    inner.prefix >= outer.prefix &&
    (inner.value & mask(outer.family, outer.prefix)) === outer.value
  );
}

/** The range `text` names, for constants that are known to be valid. */
export function cidr(text: string): Cidr {
  const parsed = parseCidr(text);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.cidr;
}
