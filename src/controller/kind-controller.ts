/**
 * The contract between the manager and the controller of one kind (SandboxRun, Sandbox, SandboxPool): the manager runs the caches, the queue and the workers; a kind's controller
 * names its kind and makes the reconciler that does one level-triggered pass per key.
 */
import type { CustomKind } from '../api/v1alpha1/group.js';
import type { KubeClient } from '../kube/client.js';
import type { InformerEventType } from '../kube/informer.js';
import type { ConfigMap, KubeObject, Lease, NetworkPolicy, Pod, RuntimeClass } from '../kube/objects.js';
import type { Store } from '../kube/store.js';
import type { Logger } from '../observability/logger.js';
import type { EventRecorder } from './events.js';
import type { OperatorMetrics } from './metrics.js';
import type { NamespacePolicies } from './pod/namespace-policy.js';

export interface ReconcileResult {
  /** Look at the key again after this long even if nothing changes. */
  requeueAfterMs?: number | undefined;
}

/** What every kind's reconciler works with: clients, the kind's own cache and the children's. */
export interface ReconcileContext<T extends KubeObject> {
  kube: KubeClient;
  logger: Logger;
  metrics: OperatorMetrics;
  events: EventRecorder;
  now: () => Date;
  /** The objects of the kind. */
  objects: Store<T>;
  pods: Store<Pod>;
  configMaps: Store<ConfigMap>;
  networkPolicies: Store<NetworkPolicy>;
  runtimeClasses: Store<RuntimeClass>;
  /** Session Leases (labelled sandpit.dev/session): the gateway's record of a session's activity. */
  leases: Store<Lease>;
  /** Puts the key on the kind's queue (work that finished outside a pass: a warm serve's result). */
  requeue(key: string): void;
  /** The namespaces whose deny-all policy is made sure of (pod/namespace-policy.ts). */
  namespacePolicies: NamespacePolicies;
}

export interface Reconciler {
  /** One pass over the object with this `namespace/name` key; throws to be retried with backoff. */
  reconcile(key: string): Promise<ReconcileResult>;
  /** The object is gone from the cache: drop anything kept for it. */
  forget?(key: string): void;
  /** Keys to look at again when a RuntimeClass appears or goes (objects waiting for their pod). */
  waitingForRuntimeClasses?(): string[];
  /** Keys to look at when a pod changes, beyond its controller's (a claimed pod still counts for its pool). */
  keysForPod?(pod: Pod): string[];
  /** Sees each pod change once the cache holds it (while the manager runs). */
  observePod?(type: InformerEventType, pod: Pod): void;
  /** The manager starts or stops acting (it leads, or not; false also when it stops). */
  setActive?(active: boolean): void;
}

export interface KindController<T extends KubeObject> {
  kind: CustomKind;
  /** The log field that names one of its objects (`run`). */
  logField: string;
  /**
   * Changes of its objects' pods, ConfigMaps and NetworkPolicies reach its queue this long after
   * the first of them (default 0: at once), so that a burst of them makes one pass.
   */
  childEventDelayMs?: number;
  /** Makes the kind's reconciler over the manager's caches (once, when the manager is made). */
  reconciler(context: ReconcileContext<T>): Reconciler;
}
