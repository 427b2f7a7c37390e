/**
 * The warm serves this operator holds, by run UID: what tells a reconcile pass that a run is being
 * served here (attached to its pool pod). A run whose status records a warm job start and that has
 * no serve here (a new leader, a restarted operator) is followed through its pod, as a cold one.
 * Also when this operator first saw each run (the acquire latency's start). In memory only.
 */
import type { WarmServe } from './serve-warm.js';

export class WarmServes {
  private readonly serves = new Map<string, WarmServe>();
  private readonly keys = new Map<string, string>();
  private readonly seen = new Map<string, number>();
  /** The pool pod each run was followed through here without a serve (by run key): see followPoolPod. */
  private readonly followed = new Map<string, string>();

  get(uid: string): WarmServe | undefined {
    return this.serves.get(uid);
  }

  add(key: string, uid: string, serve: WarmServe): void {
    this.serves.set(uid, serve);
    this.keys.set(key, uid);
  }

  /** The serve is over and its result was taken (or it was given up). */
  delete(uid: string): void {
    this.serves.delete(uid);
    for (const [key, u] of this.keys) if (u === uid) this.keys.delete(key);
  }

  /** When this operator first saw the run (ms since the epoch). */
  firstSeen(key: string, now: number): number {
    const at = this.seen.get(key);
    if (at !== undefined) return at;
    this.seen.set(key, now);
    return now;
  }

  /** True the first time the run's pool pod is followed here without a serve. */
  firstFollow(key: string, podUid: string): boolean {
    if (this.followed.get(key) === podUid) return false;
    this.followed.set(key, podUid);
    return true;
  }

  /** The run is gone (or being deleted): its serve stops; returns it so its pod can be deleted. */
  forget(key: string): WarmServe | undefined {
    this.seen.delete(key);
    this.followed.delete(key);
    const uid = this.keys.get(key);
    if (uid === undefined) return undefined;
    const serve = this.serves.get(uid);
    serve?.abort();
    this.delete(uid);
    return serve;
  }

  get size(): number {
    return this.serves.size;
  }
}
