/**
 * Idempotency keys (`requestId`): a key is scoped to its principal, and names one run. What a key
 * names and for how long depends on where runs are recorded:
 * - a backend that records runs for every gateway process (Kubernetes): the run's id is derived
 *   from (principal, key), `r-` and 16 hex digits, so every replica and a restarted gateway find
 *   the same run (its SandboxRun) for as long as that record lives;
 * - a backend whose runs only this process knows (Docker): the run's id is random, and this
 *   process remembers which run each key named for as long as it lives.
 * Each keeps the digest of the request that used the key: another request under it is a conflict.
 */
import { createHash } from 'node:crypto';
import type { RunRequest } from '../api/run.js';
import { AppError } from '../shared/errors.js';

/** sha256 of (principal id, key), unambiguous for any id. */
export function idempotencyKey(principalId: string, requestId: string): string {
  return createHash('sha256')
    .update(JSON.stringify([principalId, requestId]))
    .digest('hex');
}

/** The run id (and SandboxRun name) a key names where runs are recorded for every process. */
export function keyedRunId(key: string): string {
  return `r-${key.slice(0, 16)}`;
}

/**
 * The digest of what a request asks for, its key left out: two sends of the same request agree,
 * whatever the order of their fields. Pure.
 */
export function requestDigest(request: RunRequest): string {
  const { requestId: _key, ...asked } = request;
  return createHash('sha256').update(canonicalJson(asked)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function keyConflict(requestId: string, runId: string): AppError {
  return new AppError(
    'CONFLICT',
    `requestId "${requestId}" was already used for another request (run ${runId})`,
    {
      violations: [{ field: 'requestId', message: 'already used for a different request' }],
      hint: 'send a new requestId for a new request; repeat a request only with exactly what it sent',
    },
  );
}

/** The keys this process has used, for backends whose runs only this process knows. */
export class ProcessKeys {
  private readonly keys = new Map<string, { runId: string; digest: string }>();

  get(key: string): { runId: string; digest: string } | undefined {
    return this.keys.get(key);
  }

  set(key: string, runId: string, digest: string): void {
    this.keys.set(key, { runId, digest });
  }

  /** The key is free again: its run never started (it was refused, or the backend failed it). */
  delete(key: string): void {
    this.keys.delete(key);
  }
}
