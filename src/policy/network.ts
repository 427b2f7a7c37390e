/**
 * What network a sandbox gets (DESIGN.md §6): none unless it asks for an allowlist, and then
 * exactly the destinations it names, each within the ceiling (the config's `sandbox.egress.allow`,
 * narrowed by the token's `egress`), or the whole ceiling when it names none. A request may narrow
 * the ceiling, never widen it; every entry outside it is reported, each with the rule that refused
 * it. With DISABLE_NETWORK (`sandbox.disableNetwork`, the default) no allowlist is granted. Pure.
 */
import {
  entryText,
  NO_EGRESS,
  toEntry,
  type EffectiveNetwork,
  type EgressEntry,
  type NetworkRequest,
} from '../api/egress.js';
import type { Decision } from './decision.js';
import { entryCovers, refusalOf, withoutRepeats } from './egress-rules.js';

export const CEILING_SETTING = 'sandbox.egress.allow';
export const TOKEN_CEILING_SETTING = 'auth.tokens[].egress';

const LIMIT_ENTRIES = 8;

function ceilingText(entries: readonly EgressEntry[]): string {
  if (entries.length === 0) return '(none)';
  const shown = entries.slice(0, LIMIT_ENTRIES).map(entryText).join(', ');
  return entries.length > LIMIT_ENTRIES ? `${shown}, … (${entries.length} entries)` : shown;
}

export function checkNetwork(
  request: { network?: NetworkRequest | undefined },
  d: Decision,
): EffectiveNetwork {
  const asked = request.network;
  if (!asked || asked.egress === 'none') return NO_EGRESS;
  const { egress } = d.policy;
  if (egress.disabled) {
    d.deny({
      field: 'network.egress',
      message:
        'egress allowlist is off on this server: DISABLE_NETWORK is true (sandbox.disableNetwork); sandboxes have no network',
      limit: 'none',
      requested: 'allowlist',
    });
    return NO_EGRESS;
  }
  const ceilings = [
    { setting: CEILING_SETTING, entries: egress.ceiling },
    ...(d.scope.egress ? [{ setting: TOKEN_CEILING_SETTING, entries: d.scope.egress }] : []),
  ];
  if (asked.allow === undefined) return wholeCeiling(egress.ceiling, d);
  const entries = asked.allow.map(toEntry);
  entries.forEach((entry, i) => {
    for (const { setting, entries: ceiling } of ceilings) {
      const why = refusalOf(ceiling, entry);
      if (!why) continue;
      d.deny({
        field: `network.allow.${i}`,
        message: `${entryText(entry)} is not within the egress ceiling (${setting}): ${why}`,
        limit: ceilingText(ceiling),
        requested: entryText(entry),
      });
      break;
    }
  });
  return { egress: 'allowlist', allow: withoutRepeats(entries) };
}

/** An allowlist that names no entry: the token's ceiling (within the config's), else the config's. */
function wholeCeiling(config: readonly EgressEntry[], d: Decision): EffectiveNetwork {
  const token = d.scope.egress;
  const allow = token ? token.filter((t) => config.some((c) => entryCovers(c, t))) : [...config];
  if (allow.length === 0) {
    d.deny({
      field: 'network.egress',
      message: `the egress ceiling names no destination (${token ? TOKEN_CEILING_SETTING : CEILING_SETTING}), so an allowlist grants nothing`,
      limit: '(none)',
      requested: 'allowlist',
    });
  }
  return { egress: 'allowlist', allow: withoutRepeats(allow) };
}
