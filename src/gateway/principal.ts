import { LOCAL_PRINCIPAL_NAME } from '../api/principals.js';
import type { Scope } from '../policy/decision.js';

/** Who is asking: a token's holder and what the token allows. */
export interface Principal {
  /**
   * What owns runs and sessions and counts against per-principal limits: derived from the token
   * itself (its digest), so two tokens never share one, whatever their names.
   */
  id: string;
  /** The token's name from the config: for logs and audit records, never for ownership. */
  name: string;
  scope: Scope;
  maxConcurrentRuns?: number;
  /** Its own rate limits (rate-limits.ts); the server's when absent. */
  runsPerMinute?: number;
  outputBytesPerMinute?: number;
  /** Live sessions it may hold (the server's per-principal cap when absent). */
  maxSessions?: number;
  /** Its tenant namespace on Kubernetes (`auth.tokens[].namespace`); the backend's own when absent. */
  namespace?: string;
}

/** The caller of a local transport (CLI, stdio MCP, HTTP without tokens): bounded by policy only. */
export const LOCAL_PRINCIPAL: Principal = { id: 'local', name: LOCAL_PRINCIPAL_NAME, scope: {} };
