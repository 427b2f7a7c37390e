import type { Scope } from '../policy/decision.js';

/** Who is asking: a token's holder and what the token allows. */
export interface Principal {
  name: string;
  scope: Scope;
  maxConcurrentRuns?: number;
}

/** The caller of a local transport (CLI, stdio MCP): the machine's own user, bounded by policy only. */
export const LOCAL_PRINCIPAL: Principal = { name: 'local', scope: {} };
