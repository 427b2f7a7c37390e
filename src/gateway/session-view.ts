/** A session record as the session model shows it (pure): never a secret's value. */
import type { Session, SessionReason, SessionState } from '../api/session.js';
import { sessionLimitsView } from '../api/result.js';
import type { SessionFacts } from '../policy/session.js';

/** What the view reads of a session's spec: its facts, and only the names of its variables. */
export type ViewedSpec = SessionFacts & {
  env: readonly { name: string }[];
  secrets: readonly { name: string }[];
};

/** What the view reads of a session's record. */
export interface ViewedSession {
  sessionId: string;
  spec: ViewedSpec;
  state: SessionState;
  reason: SessionReason;
  message: string | undefined;
  createdAt: number;
  lastActivityAt: number;
  endedAt: number | undefined;
  execs: { readonly count: number; readonly running: string[] };
}

const iso = (ms: number): string => new Date(ms).toISOString();

export function sessionView(
  record: ViewedSession,
  backend: string,
  processes?: { pid: number; command: string }[],
): Session {
  const { spec } = record;
  const expiresAt = record.createdAt + spec.ttlSeconds * 1000;
  const idleAt = Math.min(expiresAt, record.lastActivityAt + spec.idleTimeoutSeconds * 1000);
  return {
    id: record.sessionId,
    state: record.state,
    reason: record.reason,
    ...(record.message !== undefined ? { message: record.message } : {}),
    ...(spec.template !== undefined ? { template: spec.template } : {}),
    image: spec.image,
    ...(spec.runtime !== undefined ? { runtime: spec.runtime } : {}),
    backend,
    limits: sessionLimitsView(spec),
    network: spec.network.egress,
    ...(spec.network.egress === 'allowlist' ? { allow: spec.network.allow } : {}),
    env: [...spec.env, ...spec.secrets].map((e) => e.name),
    createdAt: iso(record.createdAt),
    lastActivityAt: iso(record.lastActivityAt),
    expiresAt: iso(expiresAt),
    idleExpiresAt: iso(idleAt),
    ...(record.endedAt !== undefined ? { endedAt: iso(record.endedAt) } : {}),
    execs: record.execs.count,
    runningExecs: record.execs.running,
    ...(processes ? { processes } : {}),
  };
}
