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
import type { RunRecord, RunStore } from './run-store.js';

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

/** JSON with object keys sorted and undefined members left out. Pure. */
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

/** A run asked for under an idempotency key. */
export interface Keyed {
  requestId: string;
  /** idempotencyKey(principal, requestId) */
  key: string;
  /** requestDigest(request) */
  digest: string;
  /** Ends this start's claim on the key: its record exists now, or it was refused. */
  started?: () => void;
}

export function keyedRequest(principalId: string, request: RunRequest): Keyed | undefined {
  const { requestId } = request;
  if (requestId === undefined) return undefined;
  return { requestId, key: idempotencyKey(principalId, requestId), digest: requestDigest(request) };
}

/**
 * The keys of one gateway process: which run each names, the starts under a key in progress (a
 * second start of a key waits for the first, so two at once make one run), and, where only this
 * process knows its runs, every key it used with its request's digest.
 */
export class RunKeys {
  private readonly store: RunStore;
  /** Whether the backend records runs for every gateway process: then a key names its run there. */
  private readonly shared: () => boolean;
  private readonly used = new Map<string, { runId: string; digest: string }>();
  private readonly starting = new Map<string, Promise<void>>();

  constructor(store: RunStore, shared: () => boolean) {
    this.store = store;
    this.shared = shared;
  }

  /** The id a new run under this key gets. */
  runIdFor(keyed: Keyed, fresh: () => string): string {
    return this.shared() ? keyedRunId(keyed.key) : fresh();
  }

  /**
   * The record of the run the key already names in this process; undefined when the key is new
   * here (then this start claims it until `keyed.started()`; on a backend that records runs, the
   * backend finds or makes the run under the key's name). Throws CONFLICT for another request or
   * another owner, and NOT_FOUND for a key whose run this process no longer keeps.
   */
  async find(keyed: Keyed, owner: string): Promise<RunRecord | undefined> {
    for (let pending = this.starting.get(keyed.key); pending; pending = this.starting.get(keyed.key)) {
      await pending;
    }
    const used = this.shared() ? undefined : this.used.get(keyed.key);
    const runId = this.shared() ? keyedRunId(keyed.key) : used?.runId;
    const record = runId === undefined ? undefined : this.store.get(runId);
    if (record) {
      if (record.owner !== owner || record.requestDigest !== keyed.digest)
        throw keyConflict(keyed.requestId, record.runId);
      return record;
    }
    if (!used) return this.claim(keyed);
    if (used.digest !== keyed.digest) throw keyConflict(keyed.requestId, used.runId);
    throw new AppError(
      'NOT_FOUND',
      `requestId "${keyed.requestId}" named run ${used.runId}, whose result is no longer kept`,
      {
        hint: 'this server keeps a key for as long as it runs, and the results of recent runs only; send a new requestId to run again',
      },
    );
  }

  /** The run under the key has a record now. */
  recorded(keyed: Keyed, runId: string): void {
    if (!this.shared()) this.used.set(keyed.key, { runId, digest: keyed.digest });
  }

  /** The run under the key never ran (the backend failed it): the key is free for a retry. */
  forget(keyed: Keyed, runId: string): void {
    if (this.shared()) this.store.forget(runId);
    else this.used.delete(keyed.key);
  }

  /** Marks a start of the key in progress (synchronously: no other start slips in); keyed.started() ends it. */
  private claim(keyed: Keyed): undefined {
    let done!: () => void;
    const claimed = new Promise<void>((r) => (done = r));
    this.starting.set(keyed.key, claimed);
    keyed.started = () => {
      if (this.starting.get(keyed.key) === claimed) this.starting.delete(keyed.key);
      done();
    };
    return undefined;
  }
}
