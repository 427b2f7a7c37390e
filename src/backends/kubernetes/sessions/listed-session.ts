/**
 * What a Sandbox says of its session for a list, read by any replica without attaching: the facts
 * the gateway annotated it with when it made it (sessionFacts), its spec's ttlSeconds (which an
 * extension changes), and the operator's status. Pure.
 * The annotation is checked, never trusted: one that does not parse leaves the Sandbox out. What
 * only the runner knows is not there: its execs, and its secrets' names.
 */
import * as z from 'zod';
import { isSessionEnded, SESSION_ID_PATTERN } from '../../../api/session.js';
import { ANNOTATION_PRINCIPAL, ANNOTATION_SESSION_FACTS } from '../../../api/v1alpha1/labels.js';
import { SessionFactsSchema, factsOf, type EffectiveSessionSpec } from '../../../policy/session.js';
import type { ListedSession } from '../../sessions.js';
import type { SandboxObject } from './sandbox-checks.js';

/** The most an annotation may hold (well under the 256 KiB Kubernetes allows for all of them). */
const MAX_FACTS_BYTES = 64 * 1024;

const FactsSchema = z.object({
  v: z.literal(1),
  createdAt: z.number(),
  envNames: z.array(z.string().max(256)).max(2048),
  spec: SessionFactsSchema,
});

/**
 * The annotation's value for a session made now: its facts and its variables' names. Not its
 * secrets' names: nothing of a secret enters an object anyone with RBAC can read.
 */
export function sessionFacts(spec: EffectiveSessionSpec, createdAt: number): string {
  const envNames = spec.env.map((e) => e.name);
  return JSON.stringify({ v: 1, createdAt, envNames, spec: factsOf(spec) } satisfies z.infer<
    typeof FactsSchema
  >);
}

const time = (iso: string | undefined): number | undefined => {
  const ms = iso === undefined ? Number.NaN : Date.parse(iso);
  return Number.isNaN(ms) ? undefined : ms;
};

/** The Sandbox's spec.ttlSeconds, when it is a whole number of seconds. */
function specTtl(sandbox: SandboxObject): number | undefined {
  const spec = sandbox.spec;
  const ttl = spec && typeof spec === 'object' ? (spec as { ttlSeconds?: unknown }).ttlSeconds : undefined;
  return typeof ttl === 'number' && Number.isInteger(ttl) && ttl > 0 ? ttl : undefined;
}

/** The facts annotation, checked; undefined when there is none or it does not parse. */
function annotatedFacts(raw: string | undefined): z.infer<typeof FactsSchema> | undefined {
  if (raw === undefined || raw.length > MAX_FACTS_BYTES) return undefined;
  try {
    return FactsSchema.parse(JSON.parse(raw));
  } catch {
    return undefined;
  }
}

/** The session a Sandbox of `principal` stands for; undefined when it is not one, or says it badly. */
export function listedSession(sandbox: SandboxObject, principal: string): ListedSession | undefined {
  const meta = sandbox.metadata ?? {};
  const name = meta.name ?? '';
  if (!SESSION_ID_PATTERN.test(name) || meta.annotations?.[ANNOTATION_PRINCIPAL] !== principal)
    return undefined;
  const facts = annotatedFacts(meta.annotations?.[ANNOTATION_SESSION_FACTS]);
  if (!facts) return undefined;
  const status = sandbox.status ?? {};
  const state = status.phase ?? 'Creating';
  return {
    sessionId: name,
    spec: {
      ...facts.spec,
      template: facts.spec.template,
      runtime: facts.spec.runtime,
      // An extension patches spec.ttlSeconds, never the facts: the spec is the lifetime's record.
      ttlSeconds: specTtl(sandbox) ?? facts.spec.ttlSeconds,
    },
    envNames: facts.envNames,
    state,
    reason: status.reason ?? 'Created',
    // As a gateway shows it: how it ended, once it did (the operator's word on a live one is its own).
    message: isSessionEnded(state) ? status.message : undefined,
    createdAt: facts.createdAt,
    lastActivityAt: time(status.lastActivity) ?? time(status.readyTime) ?? facts.createdAt,
    endedAt: time(status.finishedTime),
  };
}
