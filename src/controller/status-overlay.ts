/**
 * The runs this controller just wrote, until its cache catches up. A pass that reads the run from
 * the cache right after a status write would otherwise start from the old object and fail with
 * Conflict (or, for a terminal write, report the transition twice). Exact, no resourceVersion
 * ordering: the written object is used only while the cache still holds the very version it
 * replaced.
 */
import type { KubeObject } from '../kube/objects.js';

export class StatusOverlay {
  private readonly written = new Map<string, { fromVersion: string | undefined; object: KubeObject }>();

  record(key: string, fromVersion: string | undefined, object: KubeObject): void {
    this.written.set(key, { fromVersion, object });
  }

  latest<T extends KubeObject>(key: string, cached: T | undefined): T | undefined {
    const entry = this.written.get(key);
    if (!entry) return cached;
    if (cached && cached.metadata?.resourceVersion === entry.fromVersion) return entry.object as T;
    this.written.delete(key);
    return cached;
  }

  forget(key: string): void {
    this.written.delete(key);
  }
}
