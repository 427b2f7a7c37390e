/**
 * The SSRF floor: addresses the egress proxy never dials, whatever name led there (DNS rebinding
 * included). Loopback, private (RFC 1918), CGNAT, link-local and the cloud metadata addresses, the
 * other special-purpose ranges, the host's own addresses and the configured internal ranges (on
 * Kubernetes the pod and service CIDRs). An IPv6 address that embeds an IPv4 one (NAT64, 6to4, the
 * old IPv4-compatible form) is held to the floor of the address it embeds too.
 *
 * A range is lifted only by a CIDR entry of the sandbox's allowlist (each within the operator's
 * ceiling) that names it explicitly: one that lies inside every floor range the address is in.
 * `127.0.0.1/32` lifts loopback for that address; `0.0.0.0/0` lifts nothing. Pure.
 */
import { cidr, cidrContains, cidrWithin, formatCidr, type Cidr, type IpAddress } from '../shared/ip.js';

export interface FloorRange {
  cidr: Cidr;
  /** What the range is, for messages and audit records. */
  name: string;
}

const SPECIAL: readonly (readonly [string, string])[] = [
  ['0.0.0.0/8', 'this network'],
  ['127.0.0.0/8', 'loopback'],
  ['10.0.0.0/8', 'private (RFC 1918)'],
  ['172.16.0.0/12', 'private (RFC 1918)'],
  ['192.168.0.0/16', 'private (RFC 1918)'],
  ['100.64.0.0/10', 'CGNAT (RFC 6598)'],
  ['169.254.0.0/16', 'link-local'],
  ['192.0.0.0/24', 'IETF protocol assignments'],
  ['198.18.0.0/15', 'benchmarking'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  ['169.254.169.254/32', 'cloud metadata'],
  ['169.254.170.2/32', 'cloud metadata (ECS)'],
  ['100.100.100.200/32', 'cloud metadata (Alibaba)'],
  ['168.63.129.16/32', 'cloud metadata (Azure)'],
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['fc00::/7', 'unique local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'site-local'],
  ['ff00::/8', 'multicast'],
  ['100::/64', 'discard'],
  ['2001::/32', 'Teredo'],
  ['fd00:ec2::254/128', 'cloud metadata (AWS)'],
];

/**
 * IPv6 ranges that carry an IPv4 address, and where it sits (bits from the right). `::` and `::1`
 * are in `::/96` but embed nothing (their IPv4 part would be 0.0.0.0/8): `except` leaves them out.
 */
const EMBEDDING: readonly { range: Cidr; shift: bigint; name: string; except?: Cidr }[] = [
  { range: cidr('64:ff9b::/96'), shift: 0n, name: 'NAT64' },
  { range: cidr('::/96'), shift: 0n, name: 'IPv4-compatible', except: cidr('::/104') },
  { range: cidr('2002::/16'), shift: 80n, name: '6to4' },
];

export interface Floor {
  readonly ranges: readonly FloorRange[];
}

export interface FloorOptions {
  /** The host's own addresses (the proxy's machine): refused as /32 or /128 each. */
  ownAddresses?: readonly IpAddress[];
  /** More ranges to refuse (`sandbox.egress.internalCidrs`). */
  internalCidrs?: readonly Cidr[];
}

export function buildFloor(options: FloorOptions = {}): Floor {
  return {
    ranges: [
      ...SPECIAL.map(([text, name]) => ({ cidr: cidr(text), name })),
      ...(options.ownAddresses ?? []).map((ip) => ({
        cidr: { family: ip.family, value: ip.value, prefix: ip.family === 4 ? 32 : 128 },
        name: "this host's own address",
      })),
      ...(options.internalCidrs ?? []).map((c) => ({
        cidr: c,
        name: 'internal (sandbox.egress.internalCidrs)',
      })),
    ],
  };
}

/** A floor range an address is in, and whether an allowlist entry may lift it. */
export interface FloorHit {
  range: FloorRange;
  /** False for the IPv4 floor of an address embedded in IPv6: no entry names that. */
  liftable: boolean;
}

/** Every floor range `ip` (unmapped) is in, the embedded IPv4 address's included. */
export function floorHits(floor: Floor, ip: IpAddress): FloorHit[] {
  const hits = floor.ranges
    .filter((r) => cidrContains(r.cidr, ip))
    .map((range) => ({ range, liftable: true }));
  if (ip.family === 6) {
    for (const e of EMBEDDING) {
      if (!cidrContains(e.range, ip) || (e.except && cidrContains(e.except, ip))) continue;
      const v4: IpAddress = { family: 4, value: (ip.value >> e.shift) & 0xffffffffn };
      for (const range of floor.ranges.filter((r) => cidrContains(r.cidr, v4)))
        hits.push({ range: { ...range, name: `${range.name} inside ${e.name}` }, liftable: false });
    }
  }
  return hits;
}

/** The allowlist range that lifts every hit for `ip`, if one does. */
export function liftingRange(
  hits: readonly FloorHit[],
  ip: IpAddress,
  cidrs: readonly Cidr[],
): Cidr | undefined {
  if (hits.some((h) => !h.liftable)) return undefined;
  return cidrs.find((c) => cidrContains(c, ip) && hits.every((h) => cidrWithin(c, h.range.cidr)));
}

/** `loopback 127.0.0.0/8`: a hit as audit records and refusals name it. */
export function hitText(hit: FloorHit): string {
  return `${hit.range.name} ${formatCidr(hit.range.cidr)}`;
}
