/**
 * Egress destinations (DESIGN.md §6): what a run or a session may ask to reach, and what the
 * config and a token allow at most. An entry is a host (a name, or a `*.` wildcard for every name
 * below a domain) or a CIDR range, with ports; or the same as text, `host[:port]` or
 * `cidr[:port]` (IPv6 with a port in brackets: `[2001:db8::/32]:443`). A host without ports means
 * 443 and 80; a CIDR without ports means every port.
 *
 * The text form is a convenience of requests, config and tokens. Stored objects (SandboxRun,
 * Sandbox) and every effective spec hold the canonical object form: lowercase names, ports listed,
 * ranges in canonical notation.
 */
import * as z from 'zod';
import { formatCidr, parseCidr } from '../shared/ip.js';

/** The ports a host entry without ports stands for. */
export const DEFAULT_HOST_PORTS: readonly number[] = [80, 443];
export const MAX_EGRESS_ENTRIES = 64;
const MAX_PORTS = 32;

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
/** A DNS name in ASCII (punycode for IDNs), optionally `*.` + a domain; the last label not all digits. */
const HOST = new RegExp(`^(?:\\*\\.)?(?:${LABEL}\\.)*${LABEL}$`);

export interface HostEntry {
  host: string;
  ports: number[];
}
export interface CidrEntry {
  cidr: string;
  /** Absent: every port. */
  ports?: number[];
}
/** One destination in canonical form. */
export type EgressEntry = HostEntry | CidrEntry;

export const isHostEntry = (e: EgressEntry): e is HostEntry => 'host' in e;
export const isCidrEntry = (e: EgressEntry): e is CidrEntry => 'cidr' in e;

type Parsed = { ok: true; entry: EgressEntry } | { ok: false; message: string };

/** Why `host` is not a name an entry may hold, or undefined when it is one (lowercase it first). */
export function hostProblem(host: string): string | undefined {
  if (host.length > 253 || !HOST.test(host))
    return `"${host}" is not a host name (letters, digits, - and dots; IDNs in punycode; "*." only in front)`;
  const last = host.slice(host.lastIndexOf('.') + 1);
  // No top-level domain starts with a digit; a name whose last label does is read as a number by
  // resolvers (`127.1`, `0x7f000001`): it is an address, to be given as one.
  if (!/^[a-z]/.test(last)) return `"${host}" looks like an IP address: give it as a cidr entry`;
  if (host.startsWith('*.') && !host.slice(2).includes('.'))
    return `"${host}" would match a whole top-level domain: name a domain below it`;
  return undefined;
}

function portsProblem(ports: readonly number[]): string | undefined {
  const bad = ports.find((p) => !Number.isInteger(p) || p < 1 || p > 65535);
  return bad === undefined ? undefined : `${bad} is not a port from 1 to 65535`;
}

const sortedPorts = (ports: readonly number[]): number[] => [...new Set(ports)].sort((a, b) => a - b);

/** The canonical entry of an object entry, or why it is not one. */
export function canonicalEntry(e: { host?: string; cidr?: string; ports?: number[] }): Parsed {
  if ((e.host === undefined) === (e.cidr === undefined))
    return { ok: false, message: 'give exactly one of host or cidr' };
  const ports = e.ports && sortedPorts(e.ports);
  const portIssue = ports && portsProblem(ports);
  if (portIssue) return { ok: false, message: portIssue };
  if (e.host !== undefined) {
    const host = e.host.toLowerCase().replace(/\.$/, '');
    const problem = hostProblem(host);
    if (problem) return { ok: false, message: problem };
    return { ok: true, entry: { host, ports: ports ?? [...DEFAULT_HOST_PORTS] } };
  }
  const parsed = parseCidr(e.cidr!.toLowerCase());
  if (!parsed.ok) return { ok: false, message: parsed.message };
  return { ok: true, entry: { cidr: formatCidr(parsed.cidr), ...(ports ? { ports } : {}) } };
}

/** `host[:port]`, `cidr[:port]`, `[ipv6 or ipv6 cidr]:port` or a bare IPv6 address or range. */
export function parseEntryText(text: string): Parsed {
  const t = text.trim();
  let target = t;
  let port: string | undefined;
  if (t.startsWith('[')) {
    const close = t.indexOf(']');
    const after = close < 0 ? undefined : t.slice(close + 1);
    if (after === undefined || (after !== '' && !after.startsWith(':')))
      return { ok: false, message: `"${t}" is not [address]:port` };
    target = t.slice(1, close);
    port = after === '' ? undefined : after.slice(1);
  } else if (t.split(':').length === 2) {
    [target, port] = t.split(':') as [string, string];
  }
  if (port !== undefined && !/^\d{1,5}$/.test(port))
    return { ok: false, message: `"${port}" is not a port from 1 to 65535` };
  const ports = port === undefined ? undefined : [Number(port)];
  const isRange = target.includes('/') || target.includes(':') || /^[\d.]+$/.test(target);
  return canonicalEntry(isRange ? { cidr: target, ports } : { host: target, ports });
}

/** The entry, written back as text (one line; for messages and audit records, not parsed again). */
export function entryText(e: EgressEntry): string {
  const where = isHostEntry(e) ? e.host : e.cidr;
  if (!e.ports) return where;
  const w = where.includes(':') ? `[${where}]` : where;
  return `${w}:${e.ports.join(',')}`;
}

/** An entry as a request, the config or a token gives it, parsed: canonical, or why it is not valid. */
export function parseEntry(input: EgressEntryInput): Parsed {
  return typeof input === 'string' ? parseEntryText(input) : canonicalEntry(input);
}

/** The canonical form of an entry that is known to be valid (its schema passed); throws otherwise. */
export function toEntry(input: EgressEntryInput): EgressEntry {
  const parsed = parseEntry(input);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.entry;
}

function report(parsed: Parsed, ctx: z.RefinementCtx): void {
  if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.message });
}

/** An entry in object form: what a SandboxRun or Sandbox stores. */
export const EgressEntryObjectSchema = z
  .object({
    host: z
      .string()
      .min(1)
      .max(253)
      .optional()
      .describe('A host name (e.g. pypi.org), or *. and a domain for every name below it'),
    cidr: z
      .string()
      .min(1)
      .max(49)
      .optional()
      .describe('An IPv4 or IPv6 range, e.g. 10.0.0.0/24, or one address'),
    ports: z
      .array(z.number().int().min(1).max(65535))
      .min(1)
      .max(MAX_PORTS)
      .optional()
      .describe('Ports; a host without them means 443 and 80, a cidr every port'),
  })
  .strict()
  .superRefine((e, ctx) => report(canonicalEntry(e), ctx));

/** An entry as text: host[:port] or cidr[:port]. */
export const EgressEntryTextSchema = z
  .string()
  .min(1)
  .max(300)
  .superRefine((t, ctx) => report(parseEntryText(t), ctx))
  .describe('host[:port] or cidr[:port], e.g. pypi.org, *.githubusercontent.com:443, 10.0.0.0/24:5432');

export const EgressEntryInputSchema = z.union([EgressEntryTextSchema, EgressEntryObjectSchema]);
export type EgressEntryInput = z.input<typeof EgressEntryInputSchema>;

export const EGRESS_MODES = ['none', 'allowlist'] as const;

const networkSchema = <T extends z.ZodType>(entry: T) =>
  z
    .object({
      egress: z
        .enum(EGRESS_MODES)
        .default('none')
        .describe(
          'none: no network at all. allowlist: only the destinations in allow (all of the ceiling when allow is absent), through sandpit’s egress proxy',
        ),
      allow: z
        .array(entry)
        .min(1)
        .max(MAX_EGRESS_ENTRIES)
        .optional()
        .describe('Destinations, each within the operator’s ceiling; only with egress allowlist'),
    })
    .strict()
    .superRefine((n, ctx) => {
      if (n.egress === 'none' && n.allow !== undefined)
        ctx.addIssue({ code: 'custom', path: ['allow'], message: 'allow needs egress: allowlist' });
    });

/** What a request asks for: entries as text or objects. */
export const NetworkSchema = networkSchema(EgressEntryInputSchema);
export type NetworkRequest = z.infer<typeof NetworkSchema>;

/** What a stored object (SandboxRun, Sandbox) holds: entries as objects only. */
export const NetworkSpecSchema = networkSchema(EgressEntryObjectSchema);

/** The network a sandbox gets, after policy: none, or exactly these destinations. */
export type EffectiveNetwork = { egress: 'none' } | { egress: 'allowlist'; allow: EgressEntry[] };

export const NO_EGRESS: EffectiveNetwork = { egress: 'none' };

/** One line for logs and audit records: `none`, or `allowlist: pypi.org:80,443, 10.0.0.0/24`. */
export function describeNetwork(n: EffectiveNetwork): string {
  return n.egress === 'none' ? 'none' : `allowlist: ${n.allow.map(entryText).join(', ')}`;
}

/** The stored form of an effective network (what a SandboxRun or Sandbox spec holds). */
export function networkSpec(n: EffectiveNetwork): z.input<typeof NetworkSpecSchema> {
  return n.egress === 'none'
    ? { egress: 'none' }
    : { egress: 'allowlist', allow: n.allow.map((e) => ({ ...e })) };
}

/**
 * An effective network read back from storage (a session's record, the journal): checked, never
 * trusted. Records written before egress existed say `"none"`.
 */
export const EffectiveNetworkSchema = z.preprocess(
  (v) => (v === 'none' ? { egress: 'none' } : v),
  z.union([
    z.object({ egress: z.literal('none') }),
    z.object({
      egress: z.literal('allowlist'),
      allow: z.array(EgressEntryObjectSchema.transform((e) => toEntry(e))).max(MAX_EGRESS_ENTRIES),
    }),
  ]),
);
