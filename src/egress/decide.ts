/**
 * The egress proxy's decisions, pure: what a request names (a CONNECT authority or an absolute
 * URI), whether the sandbox's allowlist allows that name or address on that port, and whether an
 * address the proxy resolved may be dialed (the SSRF floor). Names are matched against host
 * entries and literal addresses against CIDR entries, never one against the other; the proxy
 * dials only an address that passed here.
 */
import {
  entryText,
  hostProblem,
  isCidrEntry,
  isHostEntry,
  type EffectiveNetwork,
  type HostEntry,
} from '../api/egress.js';
import { hostEntriesFor } from '../policy/egress-rules.js';
import { cidr, cidrContains, formatIp, parseIp, unmapIp, type IpAddress } from '../shared/ip.js';
import { floorHits, hitText, liftingRange, type Floor } from './floor.js';

/** What a request asks to reach: a name (resolved by the proxy) or a literal address. */
export type Target =
  { kind: 'name'; host: string; port: number } | { kind: 'address'; ip: IpAddress; port: number };

/** Why a connection was refused: a closed set (the metrics label). */
export const DENY_REASONS = [
  'no-egress',
  'not-allowed',
  'port',
  'floor',
  'resolve',
  'limit',
  'bad-request',
  'unauthorized',
] as const;
export type DenyReason = (typeof DENY_REASONS)[number];

export type Verdict = { allowed: true; rule: string } | { allowed: false; reason: DenyReason; rule: string };

const deny = (reason: DenyReason, rule: string): Verdict => ({ allowed: false, reason, rule });

/** `host:port` or `[v6]:port`, as a CONNECT names it; undefined when it is neither. */
export function parseAuthority(authority: string, defaultPort?: number): Target | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(authority);
  if (!m) return undefined;
  const port = m[3] === undefined ? defaultPort : Number(m[3]);
  if (port === undefined || port < 1 || port > 65535) return undefined;
  return targetOf(m[1] ?? m[2]!, port, m[1] !== undefined);
}

/** A host as a URL or an authority gives it (brackets already removed for IPv6). */
export function targetOf(host: string, port: number, bracketed = false): Target | undefined {
  const ip = parseIp(host);
  if (ip) return bracketed === (ip.family === 6) ? { kind: 'address', ip: unmapIp(ip), port } : undefined;
  if (bracketed) return undefined;
  const name = host.toLowerCase().replace(/\.$/, '');
  return hostProblem(name) === undefined && !name.startsWith('*')
    ? { kind: 'name', host: name, port }
    : undefined;
}

export function targetText(t: Target): string {
  if (t.kind === 'name') return `${t.host}:${t.port}`;
  return t.ip.family === 6 ? `[${formatIp(t.ip)}]:${t.port}` : `${formatIp(t.ip)}:${t.port}`;
}

/** Whether the allowlist allows this name or address on this port, and by which entry. */
export function decideTarget(network: EffectiveNetwork, target: Target): Verdict {
  if (network.egress === 'none') return deny('no-egress', 'this sandbox has no egress (egress: none)');
  if (target.kind === 'name') return decideName(network.allow.filter(isHostEntry), target);
  const entry = network.allow.find(
    (e) =>
      isCidrEntry(e) &&
      cidrContains(cidr(e.cidr), target.ip) &&
      (e.ports === undefined || e.ports.includes(target.port)),
  );
  if (entry) return { allowed: true, rule: `allow ${entryText(entry)}` };
  return deny('not-allowed', `${targetText(target)} is not in this sandbox's allowlist`);
}

function decideName(hosts: readonly HostEntry[], target: Extract<Target, { kind: 'name' }>): Verdict {
  const named = hostEntriesFor(hosts, target.host);
  if (named.length === 0) return deny('not-allowed', `${target.host} is not in this sandbox's allowlist`);
  const entry = named.find((e) => e.ports.includes(target.port));
  if (entry) return { allowed: true, rule: `allow ${entryText(entry)}` };
  const ports = [...new Set(named.flatMap((e) => e.ports))].sort((a, b) => a - b);
  return deny('port', `port ${target.port} is not allowed for ${target.host} (allowed: ${ports.join(',')})`);
}

/**
 * Whether the proxy may dial `ip` (unmapped): not in the floor, or every floor range it is in
 * lifted by one of the allowlist's CIDR entries.
 */
export function decideAddress(network: EffectiveNetwork, floor: Floor, ip: IpAddress): Verdict {
  const hits = floorHits(floor, ip);
  if (hits.length === 0) return { allowed: true, rule: 'not in the SSRF floor' };
  const cidrs = network.egress === 'none' ? [] : network.allow.filter(isCidrEntry).map((e) => cidr(e.cidr));
  const lifted = liftingRange(hits, ip, cidrs);
  if (lifted)
    return {
      allowed: true,
      rule: `SSRF floor (${hits.map(hitText).join(', ')}) lifted by an allowlist entry`,
    };
  return deny('floor', `${formatIp(ip)} is in the SSRF floor: ${hits.map(hitText).join(', ')}`);
}
