/**
 * How egress entries relate: whether a name is matched by an entry, and whether one entry lies
 * within another (a request's within the ceiling). Pure. A `*.` wildcard matches every name below
 * its domain, at any depth, never the domain itself; a host entry never covers a range, nor a
 * range a name (names are matched as names, addresses as addresses).
 */
import { entryText, isHostEntry, type EgressEntry, type HostEntry } from '../api/egress.js';
import { cidr, cidrWithin } from '../shared/ip.js';

/** Whether `name` (a host name, lowercase) is one `pattern` names. */
export function hostMatches(pattern: string, name: string): boolean {
  if (!pattern.startsWith('*.')) return name === pattern;
  return name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1;
}

/** Whether every name `inner` (a name or a wildcard) matches is one `outer` matches. */
export function hostCovers(outer: string, inner: string): boolean {
  if (!inner.startsWith('*.')) return hostMatches(outer, inner);
  if (!outer.startsWith('*.')) return false;
  return inner === outer || hostMatches(outer, inner.slice(2));
}

/** Whether `inner`'s ports are among `outer`'s (absent: every port). */
export function portsCovered(
  outer: readonly number[] | undefined,
  inner: readonly number[] | undefined,
): boolean {
  if (!outer) return true;
  return inner !== undefined && inner.every((p) => outer.includes(p));
}

/** Whether `outer` allows every destination `inner` does. */
export function entryCovers(outer: EgressEntry, inner: EgressEntry): boolean {
  return placeCovers(outer, inner) && portsCovered(outer.ports, inner.ports);
}

/** The same, ignoring ports. */
function placeCovers(outer: EgressEntry, inner: EgressEntry): boolean {
  if (isHostEntry(outer)) return isHostEntry(inner) && hostCovers(outer.host, inner.host);
  return !isHostEntry(inner) && cidrWithin(cidr(inner.cidr), cidr(outer.cidr));
}

/**
 * Why `ceiling` does not allow all of `entry`, or undefined when one of its entries does: the
 * ports it lacks, when some entry names the place; else that none names it.
 */
export function refusalOf(ceiling: readonly EgressEntry[], entry: EgressEntry): string | undefined {
  if (ceiling.some((c) => entryCovers(c, entry))) return undefined;
  const place = ceiling.filter((c) => placeCovers(c, entry));
  if (place.length === 0) return 'no entry of the ceiling covers it';
  const allowed = [...new Set(place.flatMap((c) => c.ports ?? []))].sort((a, b) => a - b);
  const missing = (entry.ports ?? []).filter((p) => !allowed.includes(p));
  return entry.ports === undefined
    ? `the ceiling allows it on ports ${allowed.join(',')} only, not every port`
    : `port ${missing.join(',')} is not allowed there (the ceiling allows ${allowed.join(',')})`;
}

/** Entries without exact repeats, in their order. */
export function withoutRepeats(entries: readonly EgressEntry[]): EgressEntry[] {
  const out: EgressEntry[] = [];
  for (const e of entries) {
    if (!out.some((o) => entryText(o) === entryText(e))) out.push(e);
  }
  return out;
}

/** The host entries of a list that match `name` (lowercase). */
export function hostEntriesFor(allow: readonly EgressEntry[], name: string): HostEntry[] {
  return allow.filter((e): e is HostEntry => isHostEntry(e) && hostMatches(e.host, name));
}
