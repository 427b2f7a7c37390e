/** What reconcilers read: a cache of one resource (an informer, or several as one). */
import type { Informer } from './informer.js';
import type { KubeObject } from './objects.js';

export interface Store<T> {
  get(namespace: string, name: string): T | undefined;
  list(): T[];
  hasSynced(): boolean;
}

/** One store over the informers of several namespaces (or one cluster-wide informer). */
export class InformerSet<T extends KubeObject> implements Store<T> {
  readonly informers: Informer<T>[];
  private readonly byNamespace: Map<string, Informer<T>>;

  constructor(namespaces: readonly string[], make: (ns: string | undefined) => Informer<T>) {
    const scopes = namespaces.length ? [...namespaces] : [undefined];
    this.informers = scopes.map(make);
    this.byNamespace = new Map(scopes.map((ns, i) => [ns ?? '*', this.informers[i]!]));
  }

  get(namespace: string, name: string): T | undefined {
    return (this.byNamespace.get(namespace) ?? this.byNamespace.get('*'))?.get(namespace, name);
  }

  list(): T[] {
    return this.informers.flatMap((i) => i.list());
  }

  hasSynced(): boolean {
    return this.informers.every((i) => i.hasSynced());
  }
}
