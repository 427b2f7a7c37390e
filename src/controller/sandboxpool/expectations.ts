/**
 * What this operator wrote to a pool's pods that its cache may not show yet: pods it created
 * (the create's answer) and pods it deleted. A pass counts the cache corrected by them, so a slow
 * informer never makes a pool create a pod twice, nor count a deleted one as kept. An expectation
 * ends when the cache shows the write, or after EXPECTATION_TTL_MS (a lost watch event never
 * freezes a pool).
 */
import type { Pod } from '../../kube/objects.js';

export const EXPECTATION_TTL_MS = 60_000;

interface PoolWrites {
  created: Map<string, { pod: Pod; atMs: number }>;
  deleted: Map<string, number>;
}

export class PoolExpectations {
  private readonly byPool = new Map<string, PoolWrites>();

  private writes(key: string): PoolWrites {
    let w = this.byPool.get(key);
    if (!w) {
      w = { created: new Map(), deleted: new Map() };
      this.byPool.set(key, w);
    }
    return w;
  }

  created(key: string, pod: Pod, atMs: number): void {
    const name = pod.metadata?.name;
    if (name) this.writes(key).created.set(name, { pod, atMs });
  }

  deleted(key: string, uid: string, atMs: number): void {
    this.writes(key).deleted.set(uid, atMs);
  }

  /** The pool's pods as its writes left them; drops the expectations the cache has met. */
  apply(key: string, cached: readonly Pod[], nowMs: number): Pod[] {
    const w = this.byPool.get(key);
    if (!w) return [...cached];
    const names = new Set(cached.map((p) => p.metadata?.name));
    for (const [name, c] of w.created)
      if (names.has(name) || nowMs - c.atMs > EXPECTATION_TTL_MS) w.created.delete(name);
    const live = new Map(cached.map((p) => [p.metadata?.uid ?? '', p]));
    for (const [uid, at] of w.deleted) {
      const pod = live.get(uid);
      if (!pod || pod.metadata?.deletionTimestamp || nowMs - at > EXPECTATION_TTL_MS) w.deleted.delete(uid);
    }
    if (w.created.size === 0 && w.deleted.size === 0) this.byPool.delete(key);
    return [
      ...cached.filter((p) => !w.deleted.has(p.metadata?.uid ?? '')),
      ...[...w.created.values()].map((c) => c.pod),
    ];
  }

  forget(key: string): void {
    this.byPool.delete(key);
  }
}
