/** What reconcilers read: a cache of one resource (an informer, or several as one: informer.ts). */

export interface Store<T> {
  get(namespace: string, name: string): T | undefined;
  list(): T[];
  hasSynced(): boolean;
}
