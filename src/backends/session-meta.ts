/**
 * What the gateway hands a session's runner to keep (in its open request): the session as created,
 * for whoever re-attaches later (a restarted gateway, another replica). It comes back in the
 * runner's resync answer, and is checked, never trusted.
 */
import * as z from 'zod';
import { SESSION_ID_PATTERN } from '../api/session.js';
import { EffectiveSessionSpecSchema, type EffectiveSessionSpec } from '../policy/session.js';
import type { OpenParams } from '../runner/session-client.js';

export const SessionMetaSchema = z.object({
  v: z.literal(1),
  sessionId: z.string().regex(SESSION_ID_PATTERN),
  principal: z.string(),
  createdAt: z.number(),
  spec: EffectiveSessionSpecSchema,
});
export type SessionMeta = z.infer<typeof SessionMetaSchema>;

/** The runner's open request for a session: its lifetimes, limits, variables (secrets too) and record. */
export function openRequest(spec: EffectiveSessionSpec, meta: Omit<SessionMeta, 'v' | 'spec'>): OpenParams {
  return {
    ttlMs: spec.ttlSeconds * 1000,
    idleMs: spec.idleTimeoutSeconds * 1000,
    maxExecs: spec.maxExecs,
    env: [...spec.env, ...spec.secrets],
    workdir: spec.workdir,
    meta: JSON.stringify({ v: 1, ...meta, spec } satisfies SessionMeta),
    fileSizeBytes: spec.limits.fileSizeBytes,
    openFiles: spec.limits.openFiles,
  };
}

/** The spec an adopter works with: as created, with the lifetime the runner holds now (a PATCH may have changed it). */
export function adoptedSpec(meta: SessionMeta, ttlMs: number | undefined): EffectiveSessionSpec {
  const { spec } = meta;
  return {
    ...spec,
    template: spec.template,
    runtime: spec.runtime,
    ttlSeconds: Math.round((ttlMs ?? 0) / 1000),
  };
}
